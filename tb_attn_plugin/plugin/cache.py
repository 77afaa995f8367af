"""Analysis results kept across TensorBoard restarts, outside the logdir.

One file per trace version: the key hashes the trace's path, size, mtime, the engine version and
the contents of the user's pattern files (TB_ATTN_PATTERNS), so a changed trace, a new engine or an
edited kernel table never reuses an old result, and nothing needs invalidating.
A file holds one header line (status, message, summary) and then the report's JSON bytes, so that
the index can learn a run's state by reading one line, and /report can send the bytes as they are.
Errors are cached too: a broken trace is not re-parsed on every restart.

The directory is ``$TB_ATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb-attn``, else ``~/.cache/tb-attn``.
When it cannot be written (read-only home, a locked-down container) everything stays in memory.
It is kept under ``$TB_ATTN_CACHE_MAX_MB`` (default 2048): at start and as reports are written, the
least recently used entries go first, those of older engine versions (never read again) among them.
Only files named like entries are ever deleted, whatever directory the variable points at.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..format.version import ENGINE_VERSION

logger = logging.getLogger(__name__)

MEMORY_LRU_BYTES = 64 << 20  # report bytes kept in memory when they are also on disk
DEFAULT_MAX_DISK_MB = 2048
PRUNE_TO = 0.8  # a prune leaves the cache at this fraction of its limit, so it does not run on every write
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")
_VERSION_DIR = re.compile(r"reports-v[0-9A-Za-z._-]+")


@dataclass
class Result:
    status: str  # "ready" | "error"
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    report: bytes | None = None  # the report JSON; None in a header-only read


def default_dir() -> str:
    d = os.environ.get("TB_ATTN_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb-attn")


def max_disk_bytes() -> int:
    try:
        mb = float(os.environ.get("TB_ATTN_CACHE_MAX_MB", DEFAULT_MAX_DISK_MB))
    except ValueError:
        mb = DEFAULT_MAX_DISK_MB
    return int(max(mb, 1.0) * (1 << 20))


def cache_key(path: str, size: int, mtime: float, patterns: str = "",
              joins: tuple[tuple[str, int, float], ...] = ()) -> str:
    """``patterns``: the fingerprint of the user's kernel families (user_table.fingerprint) and the
    size limits in force, which change reports as much as the engine does; ``joins``: the memory
    snapshots joining the trace, (name, size, mtime) each."""
    text = "\0".join([ENGINE_VERSION, str(path), str(int(size)), repr(round(float(mtime), 6))]
                      + ([patterns] if patterns else [])
                      + [f"snapshot {n} {int(s)} {round(float(t), 6)!r}" for n, s, t in joins])
    return hashlib.sha256(text.encode()).hexdigest()


class ReportCache:
    def __init__(self, directory: str | None = None, max_bytes: int | None = None):
        self.directory = self._usable(directory or default_dir())
        self.max_bytes = max_bytes if max_bytes is not None else max_disk_bytes()
        self._lock = threading.Lock()
        self._written = 0  # bytes written since the last prune
        self._prune_lock = threading.Lock()
        # Without a directory this is the only copy, so it is never evicted; with one it is an LRU.
        self._mem: OrderedDict[str, Result] = OrderedDict()
        self._mem_bytes = 0

    @property
    def on_disk(self) -> bool:
        return self.directory is not None

    @staticmethod
    def _usable(directory: str) -> str | None:
        try:
            d = os.path.join(directory, f"reports-v{ENGINE_VERSION}")
            os.makedirs(d, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
            os.close(fd)
            os.unlink(probe)
            return d
        except OSError as exc:
            logger.warning("tb-attn: cache directory %s is not writable (%s); keeping reports in memory only",
                           directory, exc)
            return None

    def _file(self, key: str) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, key[:2], key + ".json")

    def get(self, key: str, *, with_report: bool = True) -> Result | None:
        with self._lock:
            hit = self._mem.get(key)
            if hit is not None:
                self._mem.move_to_end(key)
        if with_report:
            self._touch(key)
        if hit is not None:
            return hit
        if self.directory is None:
            return None
        try:
            with open(self._file(key), "rb") as fh:
                header = json.loads(fh.readline())
                body = fh.read() if with_report else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("tb-attn: ignoring unreadable cache entry %s: %s", key, exc)
            return None
        res = Result(header.get("status", "error"), header.get("message"), header.get("summary") or {}, body or None)
        if res.status == "ready" and with_report and not res.report:
            return None  # a cut-short entry: analyse again
        if with_report:
            self._remember(key, res)
        return res

    def _touch(self, key: str) -> None:
        if self.directory is not None:
            try:
                os.utime(self._file(key))  # read now: among the last to be pruned
            except OSError:
                pass

    def put(self, key: str, res: Result) -> None:
        self._remember(key, res)
        if self.directory is None:
            return
        header = json.dumps({"status": res.status, "message": res.message, "summary": res.summary},
                            separators=(",", ":")).encode()
        path = self._file(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(header + b"\n" + (res.report or b""))
            os.replace(tmp, path)  # readers see the old entry or the whole new one, never half
        except OSError as exc:
            logger.warning("tb-attn: cannot write cache entry %s: %s", path, exc)
            return
        with self._lock:
            self._written += len(header) + 1 + len(res.report or b"")
            due = self._written > self.max_bytes * (1 - PRUNE_TO)
            if due:
                self._written = 0
        if due:
            self.prune()

    def prune(self) -> int:
        """Delete least recently used entries (any engine version) until the cache is under
        PRUNE_TO of its limit; returns how many were deleted. Never raises."""
        if self.directory is None or not self._prune_lock.acquire(blocking=False):
            return 0  # another thread is pruning
        try:
            entries = []
            root = os.path.dirname(self.directory)
            for version in _scandir(root):
                if not (version.is_dir(follow_symlinks=False) and _VERSION_DIR.fullmatch(version.name)):
                    continue
                for bucket in _scandir(version.path):
                    if not bucket.is_dir(follow_symlinks=False):
                        continue
                    for f in _scandir(bucket.path):
                        if _ENTRY.fullmatch(f.name) and f.is_file(follow_symlinks=False):
                            try:
                                st = f.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            entries.append((st.st_mtime, st.st_size, f.path))
            total = sum(e[1] for e in entries)
            if total <= self.max_bytes:
                return 0
            target, removed = self.max_bytes * PRUNE_TO, 0
            for _, size, path in sorted(entries):
                if total <= target:
                    break
                try:
                    os.unlink(path)
                except OSError:
                    continue
                total -= size
                removed += 1
            logger.info("tb-attn: pruned %d cache entries from %s (limit %d MB)", removed, root,
                        self.max_bytes >> 20)
            return removed
        except OSError as exc:
            logger.warning("tb-attn: cannot prune the cache in %s: %s", self.directory, exc)
            return 0
        finally:
            self._prune_lock.release()

    def _remember(self, key: str, res: Result) -> None:
        with self._lock:
            old = self._mem.pop(key, None)
            if old is not None:
                self._mem_bytes -= len(old.report or b"")
            self._mem[key] = res
            self._mem_bytes += len(res.report or b"")
            if self.directory is None:
                return
            while self._mem_bytes > MEMORY_LRU_BYTES and len(self._mem) > 1:
                _, dropped = self._mem.popitem(last=False)
                self._mem_bytes -= len(dropped.report or b"")


def _scandir(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []
