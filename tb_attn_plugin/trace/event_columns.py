"""Columns of the kept ops and launches (thread, start, duration, and one args member), gathered
chunk by chunk while they are decoded, when their objects are still in the CPU's cache: link reads
these instead of walking millions of objects scattered on the heap once more.

Made by events._Kept with the C helpers of _kept.c; without them, or once any time is not a float
(an Event built in Python) or is NaN, there are none and link reads the events themselves, which
gives the same result (tests compare the two)."""

from __future__ import annotations

from array import array
from operator import attrgetter

try:
    from . import _kept as _c_kept
except ImportError:
    _c_kept = None


_CAT = attrgetter("cat")


class EventColumns:
    """The columns of one list of events, in its order: ``thread`` (index into ``keys``, each
    distinct (pid, tid) in order of first appearance), ``ts``, ``dur``, the positions and values of
    the events whose args hold ``attr`` (as _kept.arg_values gives them), and with ``cat``, which
    events are of that category."""

    __slots__ = ("attr", "cat", "n", "thread", "keys", "_index", "ts", "dur", "arg_at", "arg_values", "is_cat", "ok")

    def __init__(self, attr: str, cat: str | None = None):
        self.attr = attr
        self.cat = cat  # is_cat[i]: 1 when event i's category is this one (the ops': "cpu_op")
        self.is_cat = bytearray()
        self.n = 0
        self.thread, self.ts, self.dur = array("q"), array("d"), array("d")
        self.keys: list[tuple] = []
        self._index: dict[tuple, int] = {}
        self.arg_at: list[int] = []
        self.arg_values: list = []
        self.ok = _c_kept is not None

    def add(self, events: list) -> None:
        """The next events of the list (just appended to it)."""
        if not self.ok or not events:
            return
        got = _c_kept.columns(events, self._index, self.keys)
        if got is None:  # a time that is not a float, or NaN: link decides from the events
            self.drop()
            return
        th, _, ts, dur = got
        self.thread.frombytes(th)
        self.ts.frombytes(ts)
        self.dur.frombytes(dur)
        at, values = _c_kept.arg_values(events, self.attr, self.n)
        self.arg_at += at
        self.arg_values += values
        if self.cat is not None:
            self.is_cat += bytes(map(self.cat.__eq__, map(_CAT, events)))
        self.n += len(events)

    def drop(self) -> None:
        self.ok = False
        self.thread, self.ts, self.dur, self.keys, self._index = array("q"), array("d"), array("d"), [], {}
        self.arg_at, self.arg_values, self.is_cat = [], [], bytearray()

    def of(self, events: list) -> "EventColumns | None":
        """These columns when they are those of ``events`` (every event added, none since), else None."""
        return self if self.ok and self.n == len(events) else None
