"""Gzip files inflated member after member with work linear in the file and text bounded by its size:
what the whole-text reader (read.py), the streamed reader (stream.py) and the snapshot decoder share.

Two costs a hostile file could multiply: zlib hands back the input left after a member as a new
``unused_data`` string, so a read of a MB holding thousands of tiny members was copied once per
member (quadratic); and a member of a few KB inflates to a MB of blanks. After the first member ends,
input goes in SLICE-byte slices (a copy per member is then at most SLICE), tiny outputs are joined
before they are handed on, and the text may not pass ``bound(compressed size)``.
"""

from __future__ import annotations

from typing import Callable, Iterator

SLICE = 1 << 12  # compressed bytes fed at a time once a file has shown a second member
JOIN = 1 << 16  # outputs smaller than this are joined before they are handed on
MAGIC = b"\x1f\x8b"


class Broken(Exception):
    """The gzip stream does not inflate; str() says why."""


class Trailing(Exception):
    """Bytes after the last member that are neither a member nor zero padding."""


class Cut(Exception):
    """The stream ends inside a member."""


def members(chunks: Iterator[bytes], zmod, piece: int, limit: int, too_big: Callable[[], Exception],
            zero_padding: bool = False) -> Iterator[bytes]:
    """The inflated text of every member of the gzip stream read as ``chunks`` (zmod: zlib or isal's
    isal_zlib), in pieces of at most ``piece`` bytes (more than JOIN where the members allow); raises
    too_big() once the text passes ``limit``, else Broken, Trailing or Cut. ``zero_padding``: zeros
    after the last member end the file, as gzip(1) allows."""
    it = iter(chunks)
    buf, off = b"", 0
    d = zmod.decompressobj(16 + zmod.MAX_WBITS)
    small = False  # a member has ended: feed slices from here on
    between = b""  # bytes after a member, fewer than the two of a gzip header
    padding = False  # zeros after the last member
    total = 0
    parts: list[bytes] = []
    held = 0
    join = min(JOIN, piece)  # a reader that asks for small pieces gets them (tests ask for 4 KiB)
    while True:
        if off >= len(buf):
            buf, off = next(it, b""), 0
            if not buf:
                break
        if small:
            feed = buf[off:off + SLICE]
        else:
            feed = buf if off == 0 else buf[off:]
        off += len(feed)
        while feed:
            if padding:  # zeros, then the end or (as gzip.decompress reads it) another member
                feed = feed.lstrip(b"\0")
                if not feed:
                    break
                padding = False
            if d is None:  # between members: a gzip header must follow
                feed = between + feed
                if len(feed) < 2:
                    between = feed
                    break
                between = b""
                if feed[:2] != MAGIC:
                    if zero_padding and feed[:1] == b"\0":
                        padding = True
                        continue
                    raise Trailing()
                d = zmod.decompressobj(16 + zmod.MAX_WBITS)
            try:
                out = d.decompress(feed, min(piece, limit - total + 1))
            except MemoryError:
                raise
            except Exception as exc:  # zlib.error, or ISA-L's own types
                raise Broken(str(exc)) from None
            if out:
                total += len(out)
                if total > limit:
                    raise too_big()
                if held + len(out) >= join:
                    parts.append(out)
                    yield b"".join(parts) if len(parts) > 1 else out
                    parts, held = [], 0
                else:
                    parts.append(out)
                    held += len(out)
            if d.eof:
                feed = d.unused_data
                d = None
                if not small:  # the rest of this read goes in slices too
                    small = True
                    buf, off, feed = feed, 0, b""
            else:
                feed = d.unconsumed_tail
    if parts:  # what inflated, before saying the stream ends early (the reader keeps it)
        yield b"".join(parts)
    if d is not None:
        raise Cut()
    if between:
        raise Trailing()
