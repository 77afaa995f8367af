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


def lengths_by_group(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> np.ndarray:
    """The length of the union of each group's intervals (group: ints in [0, n_groups)), all groups in
    one union: each group's intervals are moved, relative to the group's first start, into a band of
    their own (the bands are wider than any group's extent, so no two groups' intervals ever merge)."""
    out = np.zeros(n_groups)
    if not len(start):
        return out
    first = np.full(n_groups, np.inf)
    np.minimum.at(first, group, start)
    rel_s, rel_e = start - first[group], end - first[group]
    band = float(rel_e.max()) + 1.0
    s, e = rel_s + group * band, rel_e + group * band
    order = np.argsort(s, kind="stable")
    s, e, g = s[order], e[order], group[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    head = np.flatnonzero(new)
    last = np.append(head[1:], len(s)) - 1
    return np.bincount(g[head], weights=reach[last] - s[head], minlength=n_groups)


def overlapping(lo: np.ndarray, hi: np.ndarray, start: np.ndarray, end: np.ndarray):
    """(window, clipped start, clipped end) for each pair of an interval and a window [lo, hi] it
    overlaps (windows in any order; an interval may overlap several)."""
    if not len(start) or not len(lo):
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    order = np.argsort(lo, kind="stable")
    los, his = lo[order], np.maximum.accumulate(hi[order])
    k0 = np.searchsorted(his, start, "right")  # windows before k0 all end by the interval's start
    k1 = np.searchsorted(los, end, "left")  # windows from k1 on all start at or after its end
    n = np.maximum(k1 - k0, 0)
    which = np.repeat(np.arange(len(start)), n)
    k = np.repeat(k0, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    w = order[k]
    s, e = np.maximum(start[which], lo[w]), np.minimum(end[which], hi[w])
    keep = e > s
    return w[keep], s[keep], e[keep]
