"""Reading a snapshot pickle a window at a time with the C decoder (``_snapshot_decode.c``): trace
entries arrive as columns (EntryRows), so the million entry dicts of a long history never exist.

Only an optimisation: ``load`` returns None whenever the decoder is not built or the file is not
plainly laid out (an opcode outside plain data, a damaged stream, entries where no device trace
is), and the caller loads it with the plain unpickler, which says what is wrong with it.
"""

from __future__ import annotations

from typing import Any

from ..format.errors import TraceError
from ..trace.stream import open_pieces
from . import rows as rows_mod
from .safe_pickle import ENV, check_size, max_snapshot_bytes

try:
    from ._snapshot_decode import Decoder, Refused, Unsupported
except ImportError:  # no compiler at install time
    Decoder = Refused = Unsupported = None


def available() -> bool:
    return Decoder is not None


def load(path: str) -> tuple[dict[str, Any], dict[int, rows_mod.EntryRows]] | None:
    """(the snapshot's document with its device traces emptied, {device: its entries as rows}),
    or None: load the file with safe_pickle.load_plain instead."""
    if Decoder is None:
        return None
    limit = max_snapshot_bytes(path)
    try:
        pieces = open_pieces(path, limit, ENV)
    except Exception:  # TraceError included: the plain loader opens it again and words what is wrong
        return None
    dec = Decoder(rows_mod.frame_bits)
    buf = bytearray()
    total = 0
    try:
        for piece in pieces:
            total += len(piece)
            if total > limit:
                check_size(path, total)
            buf += piece
            used = dec.feed(buf)
            del buf[:used]
            if dec.stopped:
                break
        out = dec.result()
    except Refused as exc:  # a pickle no pickler writes, whose cost would be far beyond its size
        raise TraceError(path, f"refused: {exc}") from None
    except Unsupported:
        return None
    except TraceError:
        raise
    except MemoryError:
        raise TraceError(path, "not enough memory to load this snapshot") from None
    except Exception:  # a read error: the plain loader words it
        return None
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    doc, targets, actions, frames, stacks, cols, n = out
    return _split(doc, targets, actions, frames, stacks, cols, n)


def _split(doc, targets, actions, frames, stacks, cols, n) -> tuple[dict[str, Any], dict[int, rows_mod.EntryRows]] | None:
    """Rows per device; None when a row's list is not one of the document's device traces, or a
    device trace still holds something that is not an entry."""
    if not isinstance(doc, dict):
        return None
    traces = doc.get("device_traces")
    if not isinstance(traces, list):
        return None if targets else (doc, {})
    device_of = {}
    for dev, t in enumerate(traces):
        if isinstance(t, list):
            if t:
                return None  # items the decoder did not take for entries
            device_of[id(t)] = dev
    groups = []
    for t in targets:
        dev = device_of.get(id(t))
        if dev is None:
            return None
        groups.append(dev)
    return doc, rows_mod.from_columns(cols, n, groups, actions, frames, stacks)
