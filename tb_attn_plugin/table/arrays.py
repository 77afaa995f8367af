"""Columns for numpy: any hashable column interned to integer ids into a table of its distinct values
(op names, kernel names, threads), so grouping, joining and filtering are integer work; float and int
columns viewed as float64 / int64 without a copy where they are arrays (trace/records.py holds the
scanner's records as columns).

A trace repeats a few thousand op names and threads over millions of events: the ids are found with
one dict pass over the column (each value hashed once, in C), and everything after works on the ids.
"""

from __future__ import annotations

from array import array
from typing import Hashable, NamedTuple, Sequence

import numpy as np



class Interned(NamedTuple):
    """A column as ids (int64, one per row) into ``values``: its distinct values, first appearance first."""

    ids: np.ndarray
    values: list


def intern(column: Sequence[Hashable]) -> Interned:
    """The column's ids and distinct values (equal values share an id: 1, 1.0 and True are one)."""
    names = Names()
    return Interned(names.add(column), names.values)


class _Ids(dict):
    """value -> its id: a value not seen yet takes the next id and joins ``values`` (first appearance
    first), so a column is interned in one pass of dict lookups at C speed."""

    __slots__ = ("values",)

    def __init__(self, values: list):
        super().__init__()
        self.values = values

    def __missing__(self, value) -> int:
        i = self[value] = len(self.values)
        self.values.append(value)
        return i


class Names:
    """A column interned chunk by chunk (op names as a trace is decoded): each chunk's ids into the
    distinct values of all chunks so far (``values``, first appearance first), each value hashed once
    per row and no object kept per row. ``ids`` joins the chunks' ids once."""

    __slots__ = ("values", "_index", "_parts")

    def __init__(self) -> None:
        self.values: list = []
        self._index = _Ids(self.values)
        self._parts: list[np.ndarray] = []

    def add(self, column: Sequence[Hashable]) -> np.ndarray:
        """Appends the column's values; returns their ids (int64)."""
        ids = np.fromiter(map(self._index.__getitem__, column), np.int64, len(column))
        self._parts.append(ids)
        return ids

    @property
    def ids(self) -> np.ndarray:
        if len(self._parts) != 1:
            self._parts = [np.concatenate(self._parts) if self._parts else np.zeros(0, np.int64)]
        return self._parts[0]


def values_at(values: list, ids: np.ndarray) -> list:
    """[values[i] for i in ids], gathered by numpy over an object array of the few distinct values:
    about 6x a Python pass for a column of millions of rows (an op name per op)."""
    return np.fromiter(values, object, len(values))[ids].tolist()  # fromiter: a tuple value stays one item


def as_array(typecode: str, col: np.ndarray) -> array:
    """A numpy column (of the typecode's item type) as an array.array, for passes in Python that
    index it (Python ints and floats per item, not numpy scalars): one copy, not tobytes' two."""
    out = array(typecode)
    out.frombytes(np.ascontiguousarray(col).data.cast("B"))
    return out


def new_array(typecode: str, n: int) -> tuple[array, np.ndarray]:
    """An array.array of n items (typecode "q" or "d") and a writable numpy view of it, for a column
    numpy fills in place that passes in Python then index: as_array's copy, and the fresh memory the
    numpy result took (page faults: most of a 2 GB trace's op tree), are not needed."""
    out = array(typecode, bytes(8)) * n
    return out, np.frombuffer(out, np.int64 if typecode == "q" else np.float64)


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


def runs_of(pid: np.ndarray, tid: np.ndarray) -> Interned:
    """The (pid, tid) of each row as ids into its distinct pairs, first appearance first: a trace's
    events come in long runs of one thread, so only each run's first row is hashed."""
    n = len(pid)
    if not n:
        return Interned(np.zeros(0, np.int64), [])
    start = np.flatnonzero(np.concatenate(([True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))))
    got = intern(list(zip(pid[start].tolist(), tid[start].tolist())))
    return Interned(np.repeat(got.ids, np.diff(np.append(start, n))), got.values)
