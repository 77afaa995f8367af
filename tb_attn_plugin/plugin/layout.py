"""Listing the trace files under a logdir (or the roots of --logdir_spec), local or on object storage.

A run is a directory (relative to the logdir, "." for the logdir itself) holding
``*.pt.trace.json[.gz]`` files: ``{worker}.{span}.pt.trace.json[.gz]`` as
``torch.profiler.tensorboard_trace_handler`` names them, or any ``{name}.pt.trace.json[.gz]``,
whose worker and span are read from the head of the trace itself (trace/head.py: distributedInfo's
rank or host and pid, the start time), else worker ``{name}`` and no span, with the reason (``named``).
Only those names count, so other JSON in a logdir is never read; it is
listed as skipped, with the reason, as is every trace file the listing cannot show. Hidden files and directories
(rsync and editors write temporary files there) are skipped, symlinked directories are not
followed, and symlinked files only when they resolve inside the logdir, so a listing never leaves
it (nor shows the size of a file outside it).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Iterator

from ..memory.joining import joins_by_trace, snapshot_name
from ..trace.discover import ANY_TRACE, MAX_NAME, parse_name, trace_name
from ..trace.head import identify
from ..trace.read import is_url
from ..trace.url_logdir import list_url


@dataclass(frozen=True)
class Found:
    run: str
    worker: str
    span: str
    path: str  # a local absolute path, or a URL with its protocol
    size: int
    mtime: float  # seconds since the epoch; 0.0 when the store does not say
    # The snapshot pickles that join this trace's report (memory/joining.py), as (name, size, mtime):
    # a snapshot copied in, rewritten or removed changes the report, so the index re-analyses.
    joins: tuple[tuple[str, int, float], ...] = ()
    # For a file whose name lacks {worker}.{span}: how the worker and span were chosen (trace/head.py).
    named: str = ""


class Listing(list):
    """The Found rows of a listing, and ``skipped``: [{"file", "reason"}] for the files that look like
    traces but are not listed (file relative to the logdir: the server's own paths never leave it)."""

    def __init__(self, rows=(), skipped=()):
        super().__init__(rows)
        self.skipped: list[dict[str, str]] = list(skipped)


NOT_PT_TRACE = ("not named *.pt.trace.json[.gz]: the tab reads only those, so other JSON in a logdir is never "
                "parsed (tb-attn report FILE reads it; rename it to list it)")
NOT_REGULAR = "not a regular file inside the logdir (a FIFO, a device, or a link that leads out of it)"
TOO_LONG = f"its run, worker or span name is longer than {MAX_NAME} characters"
MAX_SKIPPED = 200  # listed by name; beyond that only counted

logger = logging.getLogger(__name__)
_URI = re.compile(r"[a-zA-Z][0-9a-zA-Z.]*://.*")


@dataclass(frozen=True)
class Source:
    """Where runs come from: ``--logdir`` (one root) or ``--logdir_spec`` (several roots, each
    optionally named; a named root's runs are listed as ``name/run``, as TensorBoard names them)."""

    roots: tuple[tuple[str, str], ...]  # (group name or "", path or URL)
    text: str  # as the user gave it, for messages

    @classmethod
    def from_logdir(cls, logdir: str) -> "Source":
        return cls(((("", logdir),) if logdir else ()), logdir)

    @classmethod
    def from_spec(cls, spec: str) -> "Source":
        """Parse ``--logdir_spec`` by TensorBoard's rules: ``name:path`` or ``path``, comma-separated;
        ``s3://...``, ``/a:b`` and ``C:\\x`` are paths, not names."""
        roots = []
        for item in spec.split(","):
            if not item:
                continue
            name, path = "", item
            if not _URI.match(item) and ":" in item and item[0] != "/" and not os.path.splitdrive(item)[0]:
                name, _, path = item.partition(":")
            roots.append((name, path))
        return cls(tuple(roots), spec)

    def __bool__(self) -> bool:
        return bool(self.roots)

    def list(self) -> list[Found]:
        """Every trace under every root. Raises (naming the root) when one cannot be listed: the
        index then keeps what it found before, as it does for a single logdir."""
        if len(self.roots) == 1 and not self.roots[0][0]:
            return list_traces(self.roots[0][1])
        out = Listing()
        seen: set[tuple[str, str, str]] = set()
        for name, path in self.roots:
            try:
                found = list_traces(path)
            except Exception as exc:
                where = f"{name} ({path})" if name else path
                raise OSError(f"{where}: {type(exc).__name__}: {exc}") from exc
            out.skipped.extend({**k, "file": f"{name}/{k['file']}" if name else k["file"]}
                               for k in getattr(found, "skipped", ()))
            for f in found:
                run = f.run if not name else (name if f.run == "." else f"{name}/{f.run}")
                ident = (run, f.worker, f.span)
                if ident in seen:  # two unnamed roots with the same run: the first one wins
                    logger.warning("tb-attn: %s appears under two roots of --logdir_spec; showing the first", run)
                    continue
                seen.add(ident)
                out.append(replace(f, run=run))
        return out


def list_traces(logdir: str) -> Listing:
    """Every trace file under ``logdir``. Raises OSError (or the store's error) when it cannot list."""
    return Listing(_list_url(logdir)) if is_url(logdir) else _list_local(logdir)


def _list_local(logdir: str) -> Listing:
    root = os.path.abspath(os.path.expanduser(logdir))
    if not os.path.isdir(root):
        raise FileNotFoundError(f"logdir {logdir} does not exist or is not a directory")
    real_root = os.path.realpath(root)
    by_dir: dict[str, list[os.DirEntry]] = {}
    for d, e in walk_local(root):
        by_dir.setdefault(d, []).append(e)
    found = Listing()
    for d, entries in by_dir.items():
        names = [e.name for e in entries]
        run = os.path.relpath(d, root).replace(os.sep, "/")

        def skip(name: str, reason: str) -> None:
            found.skipped.append({"file": name if run == "." else f"{run}/{name}", "reason": reason})

        # A directory without traces lists its snapshot pickles as runs of their own (memory only);
        # beside a trace they join its report instead.
        no_traces = not any(trace_name(n) for n in names)
        listed = {}  # name -> (worker, span, entry, stat) of the files this directory lists
        taken: dict[tuple[str, str], str] = {}  # (worker, span) -> the file listed for it
        for e in sorted(entries, key=lambda e: e.name):
            parsed = trace_name(e.name) or (snapshot_name(e.name) if no_traces else None)
            if parsed is None:
                if ANY_TRACE.search(e.name):
                    skip(e.name, NOT_PT_TRACE)
                continue
            st = _listable(e, real_root)
            named = ""
            if st is not None and trace_name(e.name) and parse_name(e.name) is None:
                *parsed, named = _identify(e.path, st, parsed[0])
            if st is None:
                skip(e.name, NOT_REGULAR)
            elif max(len(run), len(parsed[0]), len(parsed[1])) > MAX_NAME:
                skip(e.name, TOO_LONG)  # could not be asked for (nor opened, mostly)
            elif tuple(parsed) in taken:
                skip(e.name, f"the same worker and span as {taken[tuple(parsed)]}, which is listed" + (
                    " (both traces say the same process recorded them at the same time: copies of one recording?)"
                    if named and parsed[1] else ""))
            else:
                taken[tuple(parsed)] = e.name
                listed[e.name] = (*parsed, e, st, named)
        joins = joins_by_trace([n for n in listed if trace_name(n)], names)
        by_name = {e.name: e for e in entries}
        for name, (worker, span, e, st, named) in listed.items():
            found.append(Found(run, worker, span, e.path, st.st_size, st.st_mtime,
                               _joins(by_name, joins.get(name, ()), real_root), named))
    found.skipped.sort(key=lambda k: k["file"])
    return found


_NAMED: OrderedDict = OrderedDict()  # (path, size, mtime_ns, inode) -> identify's answer
_NAMED_MAX = 8192
_NAMED_LOCK = threading.Lock()


def _identify(path: str, st: os.stat_result, stem: str) -> tuple[str, str, str]:
    """trace/head.identify, read once per version of the file: every scan lists the logdir again."""
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    with _NAMED_LOCK:
        if key in _NAMED:
            _NAMED.move_to_end(key)
            return _NAMED[key]
    got = identify(path, stem)
    with _NAMED_LOCK:
        _NAMED[key] = got
        while len(_NAMED) > _NAMED_MAX:
            _NAMED.popitem(last=False)
    return got


def _listable(e: os.DirEntry, real_root: str) -> os.stat_result | None:
    """The stat of a regular file the listing may show: a link only when it resolves inside the
    logdir (never followed out of it, its target's size never shown); None otherwise, or when the
    file went between listing and stat."""
    try:
        if not e.is_file() or (e.is_symlink() and not _inside(os.path.realpath(e.path), real_root)):
            return None
        return e.stat()
    except OSError:
        return None


def _joins(by_name: dict[str, os.DirEntry], names, real_root: str) -> tuple[tuple[str, int, float], ...]:
    """(name, size, mtime) of the joining snapshots ``names``, by the same rules as traces (_listable)."""
    out = []
    for name in names:
        st = _listable(by_name[name], real_root)
        if st is not None:
            out.append((name, st.st_size, st.st_mtime))
    return tuple(sorted(out))


def walk_local(root: str) -> Iterator[tuple[str, os.DirEntry]]:
    """(directory, entry) for every non-directory below ``root``; hidden names are skipped and
    symlinked directories never entered; a directory removed or unreadable mid-walk is skipped."""
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                stack.append(e.path)
            else:
                yield d, e


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


URL_NAMED = ("worker and span from the file name: the listing does not read the heads of files on object "
             "storage (one request per file at every scan)")


def _list_url(logdir: str) -> list[Found]:
    return [Found(*row, named=URL_NAMED if parse_name(row[3].rsplit("/", 1)[-1]) is None else "")
            for row in list_url(logdir)]
