"""The profiler's ``[memory]`` instants of one trace, in file order, with no Python object per event.

The C scanner writes each plainly laid out instant as one fixed-size record (``MemRec`` in
``_prefilter.c``: time, thread, device, address, bytes, totals); the other decoding paths, and a
chunk the scanner was in doubt about, give decoded Events. Both kinds are kept in the order the
file has them, so memory/profiler_events.timelines builds the same timelines from either.
"""

from __future__ import annotations

import struct
from typing import Iterator, Union

from . import native

RECORD_SIZE = native.MEMREC_SIZE
_RECORD = struct.Struct("=2d9q")  # MemRec: ts, dur, pid, tid, device type, device id, addr, bytes, totals, nulls
_NULL_BITS = (1, 2, 4, 8, 16, 32)  # N_DTYPE ... N_TRES
_NO_ARGS = 64


class MemoryEvents:
    """``parts``: runs of decoded Events (lists) and of scanner records (bytearrays), in file order."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[Union[list, bytearray]] = []

    def add_events(self, events: list) -> None:
        if not events:
            return
        if self.parts and isinstance(self.parts[-1], list):
            self.parts[-1].extend(events)
        else:
            self.parts.append(list(events))

    def add_records(self, records: bytes) -> None:
        if not records:
            return
        if self.parts and isinstance(self.parts[-1], bytearray):
            self.parts[-1] += records
        else:
            self.parts.append(bytearray(records))

    def __len__(self) -> int:
        return sum(len(p) if isinstance(p, list) else len(p) // RECORD_SIZE for p in self.parts)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __iter__(self) -> Iterator:
        raise TypeError("MemoryEvents holds records, not events: read its parts")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryEvents) and self.rows() == other.rows()

    def rows(self) -> list[tuple]:
        """Each event as (ts, dur, pid, tid, args), args None or (Device Type, Device Id, Addr, Bytes,
        Total Allocated, Total Reserved): the same tuple from a record as from an Event (tests)."""
        out: list[tuple] = []
        for part in self.parts:
            if isinstance(part, list):
                for e in part:
                    a = e.args
                    out.append((e.ts, e.dur, e.pid, e.tid, None if a is None else (
                        a.device_type, a.device_id, a.addr, a.nbytes, a.total_allocated, a.total_reserved)))
                continue
            for ts, dur, pid, tid, *vals, nulls in _RECORD.iter_unpack(part):
                args = None if nulls & _NO_ARGS else tuple(
                    None if nulls & bit else v for v, bit in zip(vals, _NULL_BITS))
                out.append((ts, dur, pid, tid, args))
        return out
