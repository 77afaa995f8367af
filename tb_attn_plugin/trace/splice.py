"""A streamed copy of a trace with extra events spliced into its ``traceEvents`` array.

The input is read in chunks (decompressed on the fly) and written out as it comes, so the copy
never holds the document in memory; the added events are written, one at a time, right after the
``[`` that opens the top-level ``traceEvents`` array (or the document, when it is a bare array).
A small scanner over the structural characters (quotes, escapes, brackets) finds that ``[``: a
``"traceEvents"`` inside a string or a nested object is not mistaken for it. The output is written
to a temporary file beside the target and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
from typing import Iterable, Iterator

from ..format.errors import TraceError
from .read import _open_url, is_url

CHUNK = 1 << 20
_STRUCT = re.compile(rb'[\\"{}\[\]:,]')
_IN_STRING = re.compile(rb'[\\"]')
_KEY = b"traceEvents"
MAX_SCAN = 256 << 20  # bytes read looking for traceEvents before giving up


class _Finder:
    """Feeds on chunks; ``found`` is the absolute offset just after the opening ``[`` once seen."""

    def __init__(self):
        self.depth = 0
        self.in_str = False
        self.escape = False
        self.str_start = -1
        self.last_str = None  # the last complete string at depth 1 (a candidate key)
        self.key = None  # the key whose value comes next at depth 1
        self.found = -1
        self.buf = b""  # the current string's bytes so far, when short enough to be the key

    def feed(self, chunk: bytes, base: int) -> None:
        pos = 0
        if self.escape and chunk:
            self.escape = False
            pos = 1
        while self.found < 0:
            if self.in_str:
                m = _IN_STRING.search(chunk, pos)
                if m is None:
                    self._keep(chunk[pos:])
                    return
                self._keep(chunk[pos:m.start()])
                if m.group() == b"\\":
                    if m.end() >= len(chunk):
                        self.escape = True
                        self._keep(b"\\")
                        return
                    self._keep(chunk[m.start():m.end() + 1])
                    pos = m.end() + 1
                    continue
                self.in_str = False
                if self.depth == 1:
                    self.last_str = self.buf
                pos = m.end()
                continue
            m = _STRUCT.search(chunk, pos)
            if m is None:
                return
            c = m.group()
            pos = m.end()
            if c == b'"':
                self.in_str, self.buf = True, b""
            elif c == b":":
                if self.depth == 1:
                    self.key = self.last_str
            elif c == b",":
                self.key = self.last_str = None
            elif c in (b"{", b"["):
                if c == b"[" and (self.depth == 0 or (self.depth == 1 and self.key == _KEY)):
                    self.found = base + pos
                    return
                self.depth += 1
            elif c in (b"}", b"]"):
                self.depth -= 1

    def _keep(self, part: bytes) -> None:
        if len(self.buf) <= len(_KEY):
            self.buf += part[: len(_KEY) + 1]


def _chunks(path: str, progress=None) -> Iterator[bytes]:
    try:
        fh = _open_url(path) if is_url(path) else open(path, "rb")
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    with fh:
        head = fh.read(2)
        fh.seek(0)
        try:
            total = os.fstat(fh.fileno()).st_size
        except (OSError, AttributeError, ValueError):  # fsspec files
            total = getattr(fh, "size", 0) or 0
        src = gzip.GzipFile(fileobj=fh) if head == b"\x1f\x8b" else fh
        while True:
            if progress is not None and total:
                progress(min(fh.tell() / total, 1.0))
            try:
                chunk = src.read(CHUNK)
            except (OSError, EOFError) as exc:
                raise TraceError(path, f"broken gzip stream: {exc}") from None
            if not chunk:
                return
            yield chunk


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: Python has no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_strict_json(src: str) -> None:
    """Raise TraceError unless the trace is JSON a strict parser accepts, UTF-8 included. The analysis
    skips events it does not need without decoding them (the C scanner only walks their structure), so
    a NaN, a bad escape or invalid UTF-8 inside one passes it; a copy must not carry them out."""
    import codecs

    import msgspec

    from .read import read_trace_text

    text, cut = read_trace_text(src)  # bounded as the analysis' read is
    if cut:
        return  # a stream cut short: the copy ends early either way, as the analysis' warning says
    why = None
    try:
        msgspec.json.decode(text, type=msgspec.Raw)  # the grammar, strictly (no NaN, no trailing comma)
    except msgspec.DecodeError as exc:
        why = str(exc)
    if why is None:
        utf8 = codecs.getincrementaldecoder("utf-8")()
        view, step = memoryview(text), 16 << 20
        try:
            for i in range(0, len(text), step):
                utf8.decode(view[i:i + step], final=i + step >= len(text))
        except UnicodeDecodeError as exc:
            why = f"invalid UTF-8 at byte {i + exc.start}"
    if why is not None:
        raise TraceError(src, f"holds bytes a strict JSON parser rejects ({why}) in events the analysis skips; "
                              "an annotated copy would not be JSON, so none is written")


def write_spliced(src: str, dst: str, events: Iterable[bytes], progress=None) -> int:
    """Copy ``src`` to ``dst`` (gzip when ``dst`` ends in .gz) with ``events`` (encoded JSON objects)
    first in its traceEvents; returns how many events were added. ``progress(fraction)`` is called
    as the input is read. Raises TraceError."""
    if not is_url(src) and os.path.exists(dst) and os.path.samefile(src, dst):
        raise TraceError(dst, "the output would overwrite the input trace; choose another -o")
    check_strict_json(src)  # what is copied out unread must be JSON too
    out_dir = os.path.dirname(os.path.abspath(dst))
    try:
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".tb-attn-annotate-", suffix=".tmp")
    except OSError as exc:
        raise TraceError(dst, f"cannot write here: {exc.strerror or exc}") from None
    raw = os.fdopen(fd, "wb")
    out = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if dst.endswith(".gz") else raw
    added = 0
    try:
        finder = _Finder()
        offset = 0
        it = _chunks(src, progress)
        rest = b""
        for chunk in it:
            finder.feed(chunk, offset)
            if finder.found >= 0:
                cut = finder.found - offset
                out.write(chunk[:cut])
                rest = chunk[cut:]
                break
            out.write(chunk)
            offset += len(chunk)
            if offset > MAX_SCAN:
                break
        if finder.found < 0:
            raise TraceError(src, "no traceEvents array found: not a Chrome/kineto trace")
        # Does the original array hold anything? Look past whitespace (maybe into the next chunks).
        while not rest.lstrip():
            nxt = next(it, None)
            if nxt is None:
                break
            rest += nxt
        empty = rest.lstrip()[:1] == b"]"
        for ev in events:
            if added:
                out.write(b",")
            out.write(ev)
            added += 1
        if added and not empty:
            out.write(b",")
        out.write(rest)
        for chunk in it:
            out.write(chunk)
        if out is not raw:
            out.close()
        raw.close()
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp made it 0600; an output file gets what open() would give it
        os.replace(tmp, dst)
    except BaseException:
        try:
            if out is not raw:
                out.close()
            raw.close()
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return added
