"""Events as numpy columns: each value of a string (or any hashable) column interned to an integer id
into a table of its distinct values, so grouping, joining and filtering are integer work for numpy.

A trace repeats a few thousand op names, categories and threads over millions of events: the ids
are found with one dict pass over the column (the values are hashed once, in C), and everything
after works on the ids.
"""

from __future__ import annotations

from array import array
from operator import attrgetter
from typing import Hashable, NamedTuple, Sequence

import numpy as np

_NAME, _CAT, _TS, _DUR = attrgetter("name"), attrgetter("cat"), attrgetter("ts"), attrgetter("dur")


class Interned(NamedTuple):
    """A column as ids (int64, one per row) into ``values``: its distinct values, first appearance first."""

    ids: np.ndarray
    values: list


def intern(column: Sequence[Hashable]) -> Interned:
    """The column's ids and distinct values (equal values share an id: 1, 1.0 and True are one)."""
    # dict.fromkeys keeps each value's first appearance, in order, at C speed
    index = {v: i for i, v in enumerate(dict.fromkeys(column))}
    return Interned(np.fromiter(map(index.__getitem__, column), np.int64, len(column)), list(index))


def floats(column: Sequence[float]) -> np.ndarray:
    """A float column as float64: an array("d") is viewed without a copy, anything else converted
    (an int as Python's float() rounds it)."""
    if isinstance(column, np.ndarray) and column.dtype == np.float64:
        return column
    if isinstance(column, array) and column.typecode == "d":
        return np.frombuffer(column, np.float64) if len(column) else np.zeros(0)
    return np.fromiter(map(float, column), np.float64, len(column))


def ints(column: Sequence[int]) -> np.ndarray:
    """An int column as int64 (an array("q") viewed without a copy); OverflowError past int64."""
    if isinstance(column, np.ndarray) and column.dtype == np.int64:
        return column
    if isinstance(column, array) and column.typecode == "q":
        return np.frombuffer(column, np.int64) if len(column) else np.zeros(0, np.int64)
    return np.fromiter(map(int.__index__, column), np.int64, len(column))


class EventTable(NamedTuple):
    """One list of events as columns, in its order: name and category ids into ``strings`` (one
    table for both), start and duration (µs, float64)."""

    name: np.ndarray
    cat: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    strings: list[str]


def event_table(events: Sequence) -> EventTable:
    """The columns of ``events`` (decoded Events: any object with name, cat, ts and dur)."""
    n = len(events)
    both = intern(list(map(_NAME, events)) + list(map(_CAT, events)))
    return EventTable(both.ids[:n], both.ids[n:], floats(list(map(_TS, events))),
                      floats(list(map(_DUR, events))), both.values)
