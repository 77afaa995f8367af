"""The C scanner's records of kept events (``Rec`` in _scanner.c) as per-list columns (Table), and the
same columns read from decoded events where the scanner did not run."""

from __future__ import annotations

import numpy as np

from ..table.arrays import floats
from .rules import INT_ARGS, JSON, NO_ARGS, NULL, NULLS_WORD, SHAPES  # noqa: F401 (the record's layout, numpy-free there)

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
