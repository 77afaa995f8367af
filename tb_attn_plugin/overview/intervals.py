"""Interval unions over numpy columns: a time counted once however many kernels or streams overlap it."""

from __future__ import annotations

import numpy as np


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint, sorted intervals covering [start[i], end[i]) for every i."""
    if not len(start):
        return start[:0], end[:0]
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]  # touching intervals merge: no gap between them
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    return s[first], reach[last]


def covered(start: np.ndarray, end: np.ndarray) -> float:
    """The length of the union of the intervals."""
    s, e = union(start, end)
    return float((e - s).sum())


def clip(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The intervals cut to [lo, hi]; those outside it dropped."""
    s, e = np.maximum(start, lo), np.minimum(end, hi)
    keep = e > s
    return s[keep], e[keep]
