"""Decoding a trace while it is read: the file streams through the C scanner in windows of about a
MB (rules.CHUNK_BYTES), so the whole text is never held (peak memory is the kept events plus a few
windows, not the text plus the events).

Three stages run at once, joined by queues of at most two items: a thread reads the file (and
inflates gzip; zlib and ISA-L release the GIL), a thread scans windows with the C scanner (no
GIL), and the caller's thread decodes each window's kept events with msgspec. On a file this path
does not understand plainly (not a kineto layout, a gzip stream cut short, a mistyped event, an
event larger than MAX_EVENT) it drops what it kept and returns None, and the caller decodes the
whole text the careful way (events.decode), which judges and words every problem.
Results are the same as events.decode's: the same rules keep the same events in file order.

The reading and scanning threads need no numpy (rules.py holds what the scanner is given), so the
command line starts them (start) before the engine imports, and decode_file takes over the chunks
scanned meanwhile: numpy's import, about a tenth of a second, then overlaps the scan.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Callable, Iterator

import msgspec

from . import inflate, limits, native, rules
from .pipeline import Ahead, pipe
from .read import is_url

if TYPE_CHECKING:
    from .events import Events

try:  # optional (the [fast] extra): ISA-L inflates in about 60% of zlib's time
    from isal import isal_zlib as _inflate_mod
except ImportError:
    _inflate_mod = zlib

READ_BYTES = 1 << 20  # compressed (or plain) bytes per read: about one window (rules.CHUNK_BYTES)
# Text handed to the scanner at a time: rules.CHUNK_BYTES, the chunk the whole-text path decodes.
MAX_HEAD = 64 << 20  # text before "traceEvents": [ (kineto's is a few KB of device properties)
MAX_EVENT = 64 << 20  # one event larger than this: not a plain trace, leave it to the careful path
MAX_TAIL = 256 << 20  # text after the event array (kineto's: trace name, time unit, a few log lines)
_SCAN_ALL = 1 << 62  # budget: a window is scanned to its end in one call
_NOTHING_ROUTED = (b"[]", b"[]", b"[]", b"[]", b"[]", b"", b"", b"", b"", 0)
AHEAD = 32  # chunks a reading begun early (start) may scan before the caller takes them (~0.3 MB each on OWLv2)


class _NotPlain(Exception):
    """Internal: this file is left to the whole-text path."""


def available() -> bool:
    return native.available and native.streaming


def decode_file(path: str, keep_shapes: Callable[[str], bool] | None = None,
                progress: Callable[[float], None] | None = None) -> tuple[Events, int] | None:
    """(Events, decompressed JSON bytes) of the trace at ``path``, streamed; None when the file is
    not plainly laid out, cannot be opened, or the scanner is not built (then use events.decode,
    which gives the same Events or the right error). ``progress(fraction of the file read)``.
    A reading of ``path`` begun by start() with the same keep_shapes (or none) is taken over."""
    reading = _begun.pop(path, None)
    if reading is not None and reading.shapes.keep_shapes is not keep_shapes:
        if reading.shapes.keep_shapes is None:  # its windows dropped no op's shapes: any rules may follow
            reading.shapes = rules.ShapesWanted(keep_shapes)
        else:  # slimmed by other rules: begin again
            reading.close()
            reading = None
    reading = reading or _begin(path, 2, keep_shapes)
    if reading is None:
        return None
    try:
        return _decode(reading, progress)
    except (_NotPlain, msgspec.DecodeError, OSError, EOFError, RecursionError):
        return None
    finally:
        reading.close()


_begun: dict[str, "_Reading"] = {}  # path -> its reading begun by start(), until decode_file takes it


def start(path: str, keep_shapes: Callable[[str], bool] | None = None) -> bool:
    """Begin reading and scanning the trace at ``path`` now, on threads of their own, up to AHEAD
    chunks ahead of decode_file(path, keep_shapes), which takes them over (the command line calls
    this before the engine, numpy with it, is imported). Meanwhile the scanning thread asks
    keep_shapes itself, so those windows are slimmed as the decoding thread would have them.
    False where nothing was begun."""
    if path not in _begun:
        try:
            reading = _begin(path, AHEAD, keep_shapes, learn=True)
        except Exception:  # a bad TB_ATTN_MAX_TRACE_BYTES: analysing the path says so, in one line
            return False
        if reading is not None:
            _begun[path] = reading
    return path in _begun


def stop_begun() -> None:
    """Stop the readings start() began that decode_file never took (their paths were not analysed)."""
    while _begun:
        _begun.popitem()[1].close()


def _begin(path: str, ahead: int, keep_shapes, learn: bool = False) -> "_Reading | None":
    if not available():
        return None
    limit = limits.max_trace_bytes(path)
    try:
        fh = _open(path, limit)
    except Exception:
        return None  # the whole-text path opens it again and says what is wrong
    return _Reading(fh, path, lambda: limits.too_big(path, limit, "inflates to"), limit, ahead,
                    rules.ShapesWanted(keep_shapes), learn)


class _Reading:
    """The first two stages at work on an open file: its text read (and inflated) on one thread, its
    windows scanned on another, up to ``ahead`` scanned chunks waiting for the decoding thread."""

    def __init__(self, fh, path: str, too_big, limit: int, ahead: int, shapes: rules.ShapesWanted, learn: bool):
        self.fh = fh
        self.reader = _Reader(fh, path, limit)
        self.shapes = shapes
        self.scan = _Scan(pipe(_bounded(self.reader.pieces(), limit, too_big)))
        # Slimmed from the first window; the names refused join the windows after, learned by the
        # scanning thread itself until the decoding thread takes over (learn), then by that thread.
        self.scan.slim = shapes.slim()
        self.scan.learn = shapes if learn else None
        self.chunks = Ahead(self.scan.chunks(), ahead)

    def close(self) -> None:
        self.chunks.close()  # stops both threads before the file is closed
        self.fh.close()


def open_pieces(path: str, limit: int, env: str = limits.ENV) -> Iterator[bytes]:
    """The bytes of a local file or URL in pieces of at most a few MB, gzip members inflated a
    window at a time, the file closed when the generator ends: what the snapshot decoder reads
    through too. Raises as opening does; an unusual gzip stream raises while iterating, and one that
    inflates past limits.inflate_bound raises its TraceError (``env``: the variable that lifts it)."""
    fh = _open(path, limit)
    reader = _Reader(fh, path, limit, env)

    def gen() -> Iterator[bytes]:
        try:
            yield from reader.pieces()
        finally:
            fh.close()
    return gen()


def _open(path: str, limit: int):
    if is_url(path):
        import fsspec

        return fsspec.open(path, "rb").open()
    # FIFOs, devices and sockets are never opened (a FIFO nobody writes would block); the careful
    # path then says what the file is.
    return limits.open_regular(path, limit)


def _file_size(fh) -> int:
    try:
        pos = fh.tell()
        size = fh.seek(0, 2)
        fh.seek(pos)
        return int(size)
    except Exception:
        return 0


class _Reader:
    """Yields the file's text in pieces; counts raw bytes read for progress. With a ``limit``, a
    gzip file's text is bounded by limits.inflate_bound (its TraceError raised while iterating)."""

    def __init__(self, fh, path: str = "", limit: int | None = None, env: str = limits.ENV):
        self.fh = fh
        self.path = path
        self.limit = limit
        self.env = env
        self.raw_read = 0
        self.size = _file_size(fh)

    def _raw(self) -> Iterator[bytes]:
        while True:
            b = self.fh.read(READ_BYTES)
            if not b:
                return
            self.raw_read += len(b)
            yield b

    def pieces(self) -> Iterator[bytes]:
        raw = self._raw()
        first = next(raw, b"")
        if not first:
            raise _NotPlain("empty")
        if first[:2] != b"\x1f\x8b":
            yield first
            yield from raw
            return
        if self.limit is None:
            bound, big = 1 << 62, None
        else:
            bound, big = limits.inflate_bound(self.path, self.limit, self.size, self.env)
        yield from self._inflate(first, raw, bound, big)

    @staticmethod
    def _inflate(first: bytes, raw: Iterator[bytes], bound: int = 1 << 62, big=None) -> Iterator[bytes]:
        """Gzip members one after the other (as gzip.decompress reads them), each output piece at
        most rules.CHUNK_BYTES: a highly compressed read never inflates into one huge block; work
        linear in the file however many members it holds (trace/inflate.py). Anything unusual (bytes
        after the last member, a stream cut short) goes to the careful path."""
        def chunks():
            yield first
            yield from raw
        try:
            yield from inflate.members(chunks(), _inflate_mod, rules.CHUNK_BYTES, bound, big)
        except inflate.Broken as exc:  # the careful path words it
            raise _NotPlain(f"broken gzip stream: {exc}") from None
        except inflate.Trailing:
            raise _NotPlain("data after the gzip stream") from None
        except inflate.Cut:
            raise _NotPlain("gzip stream ends early") from None  # the careful path salvages and warns


class _Scan:
    """Turns the text's pieces into (kept events JSON, dropped count) chunks, then records the
    text around the event array (head, tail) for the document's other fields."""

    def __init__(self, pieces: Iterator[bytes]):
        self.pieces = pieces
        self.head = b""
        self.tail = b""
        self.array = False  # the document is a bare array of events
        self.size = 0
        self.route = rules.ROUTE  # kept events sorted into their lists by the scanner
        self.slim: tuple | None = None  # and slimmed (ShapesWanted.slim: set as the names are judged)
        self.learn: rules.ShapesWanted | None = None  # or learned here, until the decoding thread begins

    def _more(self) -> bytes | None:
        b = next(self.pieces, None)
        if b is not None:
            self.size += len(b)
        return b

    def chunks(self) -> Iterator[tuple[bytes | tuple, int]]:
        try:
            yield from self._chunks()
        finally:
            close = getattr(self.pieces, "close", None)
            if close is not None:
                close()

    def _chunks(self) -> Iterator[tuple[bytes | tuple, int]]:
        window = self._find_array()  # starts at the array's '['
        pos, final, stuck = 1, False, False
        prefilter = rules.PREFILTER_RULES
        while True:
            # Fill the window; at least one more piece when the last call could not finish an event.
            while not final and (stuck or len(window) - pos < rules.CHUNK_BYTES):
                b = self._more()
                if b is None:
                    final = True
                else:
                    window = (window[pos:] + b) if pos else (window + b)
                    pos, stuck = 0, False
            kept, dropped, nxt, done = native.scan_window(window, pos, _SCAN_ALL, prefilter, not final, self.route,
                                                          self.slim if self.route is not None else None)
            if kept is None:
                raise _NotPlain("not a plain event array")
            if (kept != b"[]" and kept != _NOTHING_ROUTED) or dropped:
                learn = self.learn
                if learn is not None and isinstance(kept, tuple):
                    learn.learn(kept[10], kept[6])  # the op names and records
                    self.slim = learn.slim()
                yield kept, dropped
            if done:
                self.tail = window[nxt + 1:]
                while (b := self._more()) is not None:
                    self.tail += b
                    if len(self.tail) > MAX_TAIL:
                        raise _NotPlain("too much text after the event array")
                return
            if final:
                raise _NotPlain("the event array does not end")
            stuck = nxt == pos
            if stuck and len(window) - pos > MAX_EVENT:
                raise _NotPlain("an event larger than MAX_EVENT, or broken JSON")
            pos = nxt

    def _find_array(self) -> bytes:
        # One pass over the head however it arrives (thousands of tiny gzip members, a MB of blanks
        # each): leading blanks are dropped as they come, the head grows in place, and the key is
        # looked for only in what arrived since the last look (a match is 16 bytes in kineto's files;
        # a longer one across pieces is left to the careful path, which finds it).
        buf = bytearray()
        searched = 0
        while True:
            b = self._more()
            if b is None:
                raise _NotPlain("no event array")
            if not buf:
                b = b.lstrip()
                if not b:
                    continue
            buf += b
            if buf[:1] == b"[":
                self.array = True
                start = 0
            elif buf[:1] == b"{":
                m = rules.EVENTS_KEY.search(buf, max(0, searched - KEY_SPAN))
                if m is None:
                    if len(buf) > MAX_HEAD:
                        raise _NotPlain("no traceEvents array near the start")
                    searched = len(buf)
                    continue
                start = m.end() - 1
            else:
                raise _NotPlain("not JSON")
            self.head = bytes(buf[:start])
            return bytes(memoryview(buf)[start:])


KEY_SPAN = 256  # bytes of the last look searched again: "traceEvents" with blanks around its colon


def _bounded(pieces: Iterator[bytes], limit: int, too_big) -> Iterator[bytes]:
    """The text's pieces, stopping with a TraceError once they pass ``limit`` bytes (a gzip bomb)."""
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > limit:
            raise too_big()
        yield piece


def _decode(reading: _Reading, progress) -> tuple[Events, int]:
    from . import events as ev_mod  # numpy: the scanning threads ran without it (start)

    reader, scan = reading.reader, reading.scan
    scan.learn = None  # this thread learns from here on (add_scanned)
    kept = ev_mod._Kept(None, shapes=reading.shapes)
    for chunk, dropped in reading.chunks:
        kept.add_scanned(chunk, dropped)
        scan.slim = kept.slim()  # read by the scanning thread for the windows after this
        if progress and reader.size:
            progress(min(1.0, reader.raw_read / reader.size))
    if scan.array:
        if scan.tail.strip():
            raise _NotPlain("something after the array")
        kept.doc = ev_mod._Head()
    else:
        # Everything but the events must be valid JSON with the array where we found it (not, say,
        # inside a string that happens to spell "traceEvents"), exactly as events._decode_native checks.
        doc = ev_mod._head_decoder.decode(scan.head + b"[]" + scan.tail)
        if doc.traceEvents is ev_mod._NULL or bytes(doc.traceEvents) != b"[]":
            raise _NotPlain("traceEvents is not where it was found")
        doc.traceEvents = ev_mod._NULL
        kept.doc = doc
    return kept.result([]), scan.size
