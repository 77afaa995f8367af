"""Event columns for numpy: a string (or any hashable) column interned to integer ids into a table
of its distinct values (op names, kernel names, threads), so grouping, joining and filtering are
integer work; float and int columns viewed as float64 / int64 without a copy where they are arrays.

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
