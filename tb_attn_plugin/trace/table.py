"""Event columns for numpy: the C scanner's records of kept events as per-list columns (Table), and any
hashable column interned to integer ids into a table of its distinct values (op names, kernel names,
threads), so grouping, joining and filtering are integer work; float and int columns viewed as
float64 / int64 without a copy where they are arrays.

A trace repeats a few thousand op names and threads over millions of events: the ids are found with
one dict pass over the column (each value hashed once, in C), and everything after works on the ids.
"""

from __future__ import annotations

from array import array
from typing import Hashable, NamedTuple, Sequence

import numpy as np

from .rules import INT_ARGS, JSON, NO_ARGS, NULL, NULLS_WORD, SHAPES  # noqa: F401 (the record's layout, numpy-free there)


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


# ---- The scanner's records (``Rec`` in _prefilter.c) and the columns of one list of kept events ----

REC = np.dtype([("ts", "<f8"), ("dur", "<f8"), ("pid", "<i8"), ("tid", "<i8"), ("cat", "<i8")]
               + [(a, "<i8") for a in INT_ARGS] + [("nulls", "<i8")])
assert REC.names.index("nulls") == NULLS_WORD and REC.itemsize == 8 * (NULLS_WORD + 1)


class Table:
    """Some columns (names in REC) of one list of kept events, gathered chunk by chunk in file order:
    copied out of the scanner's records, or read from decoded events (a chunk the scanner handed
    back, an install without it, events built in Python). ``cats``: the category names that Rec.cat
    numbers. table[name] joins a column's parts once."""

    __slots__ = ("fields", "cats", "n", "_parts", "_cols")

    def __init__(self, fields: tuple[str, ...], cats: tuple[str, ...]):
        self.fields, self.cats, self.n = fields, cats, 0
        self._parts: dict[str, list[np.ndarray]] = {f: [] for f in fields}
        self._cols: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self.n

    def add_records(self, recs: bytes) -> None:
        if not recs:
            return
        r = np.frombuffer(recs, REC)
        for f in self.fields:
            # a compact copy: the chunk's records are freed
            self._parts[f].append(r[f] & (SHAPES - 1) if f == "nulls" else r[f].copy())
        self.n += len(r)
        self._cols.clear()

    def add_events(self, events: list) -> None:
        if not events:
            return
        cols = _event_columns(events, self.fields, self.cats)
        for f in self.fields:
            self._parts[f].append(cols[f])
        self.n += len(events)
        self._cols.clear()

    def __getitem__(self, field: str) -> np.ndarray:
        col = self._cols.get(field)
        if col is None:
            parts = self._parts[field]
            col = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else \
                np.zeros(0, REC.fields[field][0])
            self._parts[field] = [col]
            self._cols[field] = col
        return col

    def finish(self) -> "Table":
        """Every column joined now (then reading it from two threads at once is safe)."""
        for f in self.fields:
            self[f]
        return self

    def has(self, arg: str) -> np.ndarray:
        """Whether each event's args hold ``arg`` (not None), as bools."""
        return (self["nulls"] & (NULL[arg] | NO_ARGS)) == 0

    @classmethod
    def of(cls, events: list, fields: tuple[str, ...], cats: tuple[str, ...]) -> "Table":
        t = cls(fields, cats)
        t.add_events(events)
        return t.finish()


def _event_columns(events: list, fields: tuple[str, ...], cats: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The record's columns read from decoded events: what the scanner writes for the same events.
    A pid or tid that is not an int, or an int past int64, makes that column one of Python objects."""
    out: dict[str, np.ndarray] = {}
    n = len(events)
    if "ts" in fields:
        out["ts"] = floats([e.ts for e in events])
    if "dur" in fields:
        out["dur"] = floats([e.dur for e in events])
    for f in ("pid", "tid"):
        if f in fields:
            out[f] = _int_or_object([getattr(e, f) for e in events])
    if "cat" in fields:
        ids = {c: i for i, c in enumerate(cats)}
        out["cat"] = np.fromiter((ids.get(e.cat, -1) for e in events), np.int64, n)
    args = [e.args for e in events]
    nulls = np.zeros(n, np.int64)
    for k, a in enumerate(INT_ARGS):
        vals = [None if x is None else getattr(x, a) for x in args]
        nulls |= np.fromiter((v is None for v in vals), bool, n).astype(np.int64) << k
        if a in fields:
            out[a] = _int_or_object([0 if v is None else v for v in vals])
    nulls |= np.fromiter((x is None for x in args), bool, n).astype(np.int64) << len(INT_ARGS)
    if "nulls" in fields:
        out["nulls"] = nulls
    return out


def _int_or_object(values: list) -> np.ndarray:
    if all(type(v) is int for v in values):
        try:
            return np.array(values, np.int64) if values else np.zeros(0, np.int64)
        except OverflowError:
            pass
    return np.array(values + [None], object)[:-1]  # the trailing None keeps tuples from becoming rows


def runs_of(pid: np.ndarray, tid: np.ndarray) -> Interned:
    """The (pid, tid) of each row as ids into its distinct pairs, first appearance first: a trace's
    events come in long runs of one thread, so only each run's first row is hashed."""
    n = len(pid)
    if not n:
        return Interned(np.zeros(0, np.int64), [])
    start = np.flatnonzero(np.concatenate(([True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]))))
    got = intern(list(zip(pid[start].tolist(), tid[start].tolist())))
    return Interned(np.repeat(got.ids, np.diff(np.append(start, n))), got.values)
