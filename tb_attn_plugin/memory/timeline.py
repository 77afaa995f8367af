"""Allocation events of one device as columns: pairing allocs with frees, live bytes, downsampling."""

from __future__ import annotations

import bisect
from array import array
from itertools import accumulate

import msgspec
import numpy as np

from ..table import columns
from ..table.arrays import as_array, floats, ints

ADDR_MASK = (1 << 63) - 1  # addresses are stored signed; a pointer never uses the top bit


class Timeline(msgspec.Struct):
    """Allocations (+bytes) and frees (-bytes) of one device, in time order once ``finish()`` ran.

    ``live`` is what was allocated after each event: the profiler's own ``Total Allocated`` when
    every event carries it, else a running sum from ``base`` (bytes already live before the first
    event, e.g. the blocks a snapshot's segments still hold)."""

    device: str
    t: array = msgspec.field(default_factory=lambda: array("d"))
    delta: array = msgspec.field(default_factory=lambda: array("q"))
    addr: array = msgspec.field(default_factory=lambda: array("q"))
    stream: array = msgspec.field(default_factory=lambda: array("q"))
    thread: array = msgspec.field(default_factory=lambda: array("q"))  # index into ``threads``; -1 unknown
    total: array | None = None  # Total Allocated after the event, where the source records it
    reserved: array | None = None  # Total Reserved after the event (profiler) or segments' sum (snapshot)
    threads: list = msgspec.field(default_factory=list)
    base: int = 0
    live: array = msgspec.field(default_factory=lambda: array("q"))
    pair: array = msgspec.field(default_factory=lambda: array("q"))  # alloc -> index of its free, free -> its alloc, -1 none

    def __len__(self) -> int:
        return len(self.t)

    def finish(self) -> "Timeline":
        """Sort by time (stably: events at one time stamp keep their order), pair, compute live."""
        n = len(self.t)
        t = floats(self.t)  # a view of the array, not a copy
        if n > 1 and bool((t[1:] < t[:-1]).any()):  # out of order anywhere
            order = sorted(range(n), key=self.t.__getitem__)
            for name in ("t", "delta", "addr", "stream", "thread", "total", "reserved"):
                col = getattr(self, name)
                if col is not None:
                    setattr(self, name, array(col.typecode, (col[i] for i in order)))
        self._pair()
        self._live()
        return self

    def _pair(self) -> None:
        """An alloc pairs with the next free of the same address on the same stream (table/columns.py,
        numpy sorts: a big trace has millions of events)."""
        self.pair = as_array("q", columns.pairs(self.delta, self.addr, self.stream))

    def _live(self) -> None:
        total = self.total
        if total is not None and len(total) == len(self.t):
            self.live = array("q", total)
            return
        live = array("q", accumulate(self.delta, initial=self.base))
        self.live = live[1:]

    def peak_bytes(self) -> int:
        """The highest live value (0 when empty)."""
        return int(ints(self.live).max()) if len(self.live) else 0

    def peak_index(self) -> int:
        """Index of the first event at the highest live value (-1 when empty)."""
        return int(np.argmax(ints(self.live))) if len(self.live) else -1

    def live_before(self, i: int) -> int:
        """Live bytes just before event ``i``."""
        if i <= 0:
            return self.live[0] - self.delta[0] if len(self.live) else self.base
        return self.live[i - 1]

    def live_at(self, i: int) -> list[int]:
        """Indices of the allocations live right after event ``i``: allocated at or before it and
        freed after it (or never, within the record)."""
        d, pair = ints(self.delta)[:i + 1], ints(self.pair)[:i + 1]
        return np.flatnonzero((d > 0) & ((pair < 0) | (pair > i))).tolist()


def downsample(t, values, max_points: int, keep: tuple[int, ...] = ()) -> tuple[list[float], list[int], list[int]]:
    """At most about ``max_points`` (time, value) points: per time bucket the first, the lowest and
    the highest point, so every peak and trough survives; ``keep`` indices are always included.
    ``t`` must be sorted. Returns (times, values, source indices)."""
    n = len(t)
    if n <= max_points:
        idx = list(range(n))
    else:
        buckets = max(1, max_points // 3)
        t0, t1 = t[0], t[n - 1]
        width = (t1 - t0) / buckets
        chosen: set[int] = {i for i in keep if 0 <= i < n}
        chosen.add(n - 1)
        # Bucket edges by binary search, then the first lowest and highest of each slice (numpy's
        # argmin and argmax: the first of equal ones, as list.index(min(...)) finds).
        edges = [0] + [bisect.bisect_left(t, t0 + width * b) for b in range(1, buckets)] + [n] if width > 0 else [0, n]
        v = ints(values)
        for a, b in zip(edges, edges[1:]):
            if b <= a:
                continue
            seg = v[a:b]
            chosen.add(a)
            chosen.add(a + int(seg.argmin()))
            chosen.add(a + int(seg.argmax()))
        idx = sorted(chosen)
    return columns.rounded([float(t[i]) for i in idx]), [int(values[i]) for i in idx], idx
