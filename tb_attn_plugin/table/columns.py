"""Sums and spans of op columns per group (a call's stage and pass, a step, an op name), where each
op name occurs, and a memory timeline's pairs and byte counts: the grouped work the metrics, the
roofline timing, the memory section and Linked.where_name share, done by numpy on integer ids
(table/arrays.py).

Float sums are numpy's ``bincount`` with weights, which adds each group's values one by one in row
order starting from 0.0: the same sums, to the bit, as a Python loop over the rows. Byte sums stay
exact ints past int64."""

from __future__ import annotations

import functools
from array import array
from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np

from .arrays import floats, intern, ints

_INT64_MAX = (1 << 63) - 1


def _empty(v) -> bool:
    return v is None or (isinstance(v, str) and not v)


def _rows(rows: Sequence[int], n: int) -> np.ndarray:
    """Row indices as int64, each checked against a column of ``n`` rows (negative ones too)."""
    if isinstance(rows, range):  # np.asarray would take a range an item at a time
        r = np.arange(rows.start, rows.stop, rows.step, dtype=np.int64)
    else:
        r = np.asarray(rows, dtype=np.int64) if len(rows) else np.zeros(0, np.int64)
    if r.size and (int(r.min()) < 0 or int(r.max()) >= n):
        raise IndexError("a row outside the columns")
    return r


def _at(col: Sequence, rows: np.ndarray, listed: Callable[[], list]) -> Sequence:
    """The column's items at ``rows``, as the objects it holds (``listed``: the rows as a list)."""
    if isinstance(col, np.ndarray):
        return col[rows].tolist()
    got = listed()
    return [col[got[0]]] if len(got) == 1 else itemgetter(*got)(col) if len(got) else []


def _codes(items: Sequence, none_as: Any) -> tuple[np.ndarray, bool, list | None]:
    """Numbers for a key column's items that are equal where the items are equal (None and "" read
    as ``none_as``), whether they are the items themselves (all ints or bools), else interned ids,
    and for interned strings (or None) each id's key item: equal strings are one value, so the
    item a group's first row holds is its id's item."""
    if items and type(items[0]) in (int, bool):
        got = np.array(items)
        if got.dtype.kind in "biu":
            return got, True, None
    ids, values = intern(items)
    normal = [none_as if _empty(v) else v for v in values]
    plain = all(v is None or type(v) is str for v in values)
    if normal == values or len(set(normal)) == len(normal):
        return ids, False, normal if plain else None
    again = intern(normal)  # none_as may equal a value the column has: one key, as a dict makes
    return again.ids[ids], False, again.values if plain else None


def _groups(rows: Sequence[int], cols: tuple, none_as: Any) -> tuple[np.ndarray, np.ndarray, list]:
    """(rows as int64, each row's group number, the groups' keys by number): keys as in sums,
    numbered in order of first appearance, each key made of the column items of its first row."""
    n = min(map(len, cols)) if cols else 0
    r = _rows(rows, n)
    if not len(r):
        return r, np.zeros(0, np.int64), []
    listed = functools.cache(lambda: rows if isinstance(rows, list) else r.tolist())
    # An int (or bool) array column is its own codes: gathered, never made Python objects but for the keys.
    items = [col[r] if _int_array(col) else _at(col, r, listed) for col in cols]
    codes, numbers, keyed = zip(*((it, True, None) if isinstance(it, np.ndarray) else _codes(it, none_as)
                                  for it in items))
    key, size = None, 1
    for c in codes:  # one int64 key per row: the columns' dense codes in mixed radix
        d, k = _dense(c)
        if key is None:
            key, size = d, k
            continue
        if size * k >= 1 << 62:
            key, size = _dense(key, force=True)
        key, size = key * k + d, size * k
    if size > 4 * len(r) + 64:  # sparse keys: number them by sorting
        key, size = _dense(key, force=True)
    first_of = np.full(size, len(r), np.int64)
    np.minimum.at(first_of, key, np.arange(len(r)))
    present = np.flatnonzero(first_of < len(r))
    by_first = np.argsort(first_of[present], kind="stable")
    number = np.empty(size, np.int64)
    number[present[by_first]] = np.arange(len(present))
    gid = number[key]
    first = first_of[present[by_first]]  # each group's first row, groups in order of first appearance
    at = first.tolist()
    parts = [it[first].tolist() if isinstance(it, np.ndarray)
             else [ks[j] for j in c[first].tolist()] if ks is not None
             else _normal(itemgetter(*at)(it) if len(at) > 1 else (it[at[0]],), none_as, k)
             for it, c, k, ks in zip(items, codes, numbers, keyed)]
    return r, gid, list(zip(*parts)) if len(cols) > 1 else parts[0]


def _int_array(col) -> bool:
    return isinstance(col, np.ndarray) and col.dtype.kind in "biu"


def _dense(codes: np.ndarray, force: bool = False) -> tuple[np.ndarray, int]:
    """Codes renumbered into [0, size), and size: shifted when their range is small, else by sorting."""
    if not len(codes):
        return codes.astype(np.int64), 1
    lo, hi = int(codes.min()), int(codes.max())
    if not force and hi - lo < 4 * len(codes) + 64:
        return codes.astype(np.int64, copy=False) - lo, hi - lo + 1
    _, inv = np.unique(codes, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(inv.max()) + 1


def _normal(items: Sequence, none_as: Any, numbers: bool) -> list:
    """The items, None and "" read as none_as (``numbers``: all are ints or bools, none is empty)."""
    if numbers:
        return list(items)
    return [none_as if _empty(v) else v for v in items]


def sums(rows: list[int], cols: tuple, none_as: Any = None, values: Sequence[float] | None = None) -> dict:
    """For each row (an op index) in order, its key: the row's item of the one column in ``cols``,
    or the tuple of their items, None and "" read as ``none_as`` (as ``stage or "other"``). Returns
    key -> [count, sum of values[row]] (summed from 0.0 in row order), keys in order of first appearance."""
    r, gid, keys = _groups(rows, cols, none_as)
    count = np.bincount(gid, minlength=len(keys)).tolist()
    if values is None:
        total = [0.0] * len(keys)
    else:
        total = np.bincount(gid, weights=floats(values)[r], minlength=len(keys)).tolist()
    return {k: [c, s] for k, c, s in zip(keys, count, total)}


def keyed(rows: list[int], cols: tuple, none_as: Any, n: int) -> tuple[np.ndarray, list]:
    """Keys as in sums, as a column of ``n`` ids: each row's key's number (first appearance first),
    -1 at every other position; and the keys by number. Later groupings by the same key (over some
    of the rows) read this one int column, not the Python columns again."""
    r, gid, keys = _groups(rows, cols, none_as)
    out = np.full(n, -1, np.int64)
    out[r] = gid
    return out, keys


def spans(rows: list[int], cols: tuple, none_as: Any, ts: Sequence[float], dur: Sequence[float]) -> dict:
    """Keys as in sums; key -> [least ts[row], greatest ts[row] + dur[row]] (of equal ones, 0.0 and
    -0.0, the first in row order, as Python's min and max keep)."""
    r, gid, keys = _groups(rows, cols, none_as)
    start = floats(ts)[r]
    end = start + floats(dur)[r]
    least, greatest = _extreme(np.minimum, gid, start, len(keys)), _extreme(np.maximum, gid, end, len(keys))
    return {k: [a, b] for k, a, b in zip(keys, least.tolist(), greatest.tolist())}


def _extreme(pick: np.ufunc, gid: np.ndarray, x: np.ndarray, groups: int) -> np.ndarray:
    """Per group, ``pick`` (np.minimum or np.maximum) of its x; where that is zero, the zero of the
    group's first row holding one (0.0 and -0.0 compare equal: Python's min and max keep the first)."""
    out = np.full(groups, np.inf if pick is np.minimum else -np.inf)
    pick.at(out, gid, x)
    zero = np.flatnonzero(x == 0.0)
    if len(zero):
        first = np.full(groups, len(x), np.int64)
        np.minimum.at(first, gid[zero], zero)
        fix = np.flatnonzero((out == 0.0) & (first < len(x)))
        out[fix] = x[first[fix]]
    return out


def factorize(rows: list[int], cols: tuple, none_as: Any = None) -> tuple[np.ndarray, list]:
    """Keys as in sums: each row's key as a number (int64), and the keys by number (first appearance first)."""
    _, gid, keys = _groups(rows, cols, none_as)
    return gid, keys


def positions(ids: np.ndarray, count: int) -> list[np.ndarray]:
    """For each id below ``count``, the ascending positions (int64) where it occurs in ``ids``."""
    # a stable sort of ids that fit 16 bits is numpy's radix sort (a trace has a few thousand names)
    order = np.argsort(ids.astype(np.uint16) if count <= 1 << 16 else ids, kind="stable")
    bounds = np.cumsum(np.bincount(ids, minlength=count)).tolist() if count else []
    return [order[a:b] for a, b in zip([0] + bounds, bounds)]  # views, as np.split makes them (without its cost)


def where(values: list, at: list[np.ndarray], test: Callable[[Any], object]) -> list[int]:
    """The positions (ascending) of the values that pass ``test``: ``values`` the distinct values of
    a column, ``at`` where each occurs (positions), each value asked once."""
    hits = [rows for v, rows in zip(values, at) if test(v)]
    if len(hits) <= 1:
        return hits[0].tolist() if hits else []
    return np.sort(np.concatenate(hits)).tolist()


def pairs(delta: Sequence[int], addr: Sequence[int], stream: Sequence[int]) -> np.ndarray:
    """Each allocation (delta > 0) paired with the next free (delta < 0) of its address on its stream
    (an allocation of an address still open replaces it): per event, its pair's index or -1 (int64)."""
    d = np.sign(_exact_ints(delta))
    if not (len(d) == len(addr) == len(stream)):
        raise ValueError("pairs: the columns differ in length")
    pair = np.full(len(d), -1, np.int64)
    moved = np.flatnonzero(d)  # events of no size neither open nor close anything
    if not len(moved):
        return pair
    a, s = _sortable(addr, moved), _sortable(stream, moved)
    perm = np.lexsort((s, a))  # by address and stream, in time order within each (stable)
    order = moved[perm]
    a, s = a[perm], s[perm]
    same = np.zeros(len(order), bool)
    same[1:] = (a[1:] == a[:-1]) & (s[1:] == s[:-1])
    # A free closes the allocation just before it on its address and stream, if that one is still
    # open: the event just before it is that allocation (a free in between would have closed it).
    closes = np.flatnonzero(same[1:] & (d[order[1:]] < 0) & (d[order[:-1]] > 0)) + 1
    pair[order[closes]] = order[closes - 1]
    pair[order[closes - 1]] = order[closes]
    return pair


def _sortable(column: Sequence[int], at: np.ndarray) -> np.ndarray:
    """The column's items at ``at`` as int64 (as ids of its distinct values where one is past int64)."""
    x = _exact_ints(column)[at]
    return intern(x.tolist()).ids if x.dtype == object else x


def _exact_ints(column: Sequence[int]) -> np.ndarray:
    """An int column as int64, or as Python ints (object) where one is past int64."""
    try:
        return ints(column)
    except OverflowError:
        return np.array(list(column), dtype=object)


def picked(rows: list[int], ids: np.ndarray, wanted: np.ndarray, values: Sequence[float]) -> list[float]:
    """values[row] for the rows (in order) whose id is among ``wanted`` (a bool per id)."""
    r = _rows(rows, len(ids))
    return floats(values)[r[wanted[ids[r]]]].tolist()


def nonnegative(values: Sequence[int]) -> list[int]:
    """The positions (ascending) of the values >= 0."""
    return np.flatnonzero(np.asarray(values) >= 0).tolist() if len(values) else []


def masked_sums(mask: Sequence[int], keys: Sequence[int], values: Sequence[float]) -> tuple[float, dict]:
    """Over the rows whose mask is true, in row order: (the sum of their values from 0.0, key ->
    the sum of its rows' values from 0.0, keys in order of first appearance)."""
    if not (len(mask) == len(keys) == len(values)):
        raise ValueError("masked_sums: the columns differ in length")
    on = np.flatnonzero(np.frombuffer(bytes(mask), np.uint8) if len(mask) else np.zeros(0, np.uint8))
    v = floats(values)[on]
    total = float(np.bincount(np.zeros(len(on), np.int64), weights=v, minlength=1)[0])
    if not isinstance(keys, np.ndarray) and keys and type(keys[0]) is int:
        as_ints = np.array(keys)  # a step per op: one conversion, not a gather of Python objects
        keys = as_ints if as_ints.dtype.kind in "iu" else keys
    _, gid, groups = _groups(on, (keys,), None) if len(on) else (None, on, [])
    return total, dict(zip(groups, np.bincount(gid, weights=v, minlength=len(groups)).tolist()))


def byte_counts(delta: Sequence[int], pair: Sequence[int], slot: Sequence[int]) -> tuple[int, int, int, int, int, list[int]]:
    """A memory timeline's (allocations, events of no size, bytes allocated, frees of no allocation,
    allocations never freed, the indices of the allocations inside some call: slot >= 0)."""
    d, p, k = _exact_ints(delta), ints(pair), ints(slot)
    if not (len(d) == len(p) == len(k)):
        raise ValueError("byte_counts: the columns differ in length")
    alloc, free = d > 0, d < 0
    grown = d[alloc]
    if grown.dtype == object or (grown.size and int(grown.max()) > _INT64_MAX // grown.size):
        allocated = sum(grown.tolist())  # past int64: Python's exact ints
    else:
        allocated = int(grown.sum())
    return (int(alloc.sum()), int((d == 0).sum()), allocated, int((free & (p < 0)).sum()),
            int((alloc & (p < 0)).sum()), np.flatnonzero(alloc & (k >= 0)).tolist())


def rounded(values: Sequence[float], digits: int = 3) -> list[float]:
    """Python's ``round(v, digits)`` of each value (0 <= digits <= 6), to the bit, at C speed where it
    is sure: round() takes the exact value times 10**digits to the nearest integer q (ties to even) and
    returns the double nearest q / 10**digits, which is what numpy's division gives for the same q.
    numpy's product can differ from the exact one by half an ulp, so a product within an ulp of a
    tie, one past 2**52 (no fraction left to round), a non-finite value and one not a float (round()
    keeps an int an int) are left to round()."""
    if not 0 <= digits <= 6:
        raise ValueError("rounded: 0 <= digits <= 6")
    plain = isinstance(values, np.ndarray) and values.dtype == np.float64 or \
        isinstance(values, array) and values.typecode == "d"
    others = [] if plain or set(map(type, values)) <= {float} else \
        [i for i, v in enumerate(values) if type(v) is not float]
    x = floats([v if type(v) is float else 0.0 for v in values] if others else values)  # others: round() below
    scale = float(10 ** digits)
    with np.errstate(invalid="ignore", over="ignore"):
        p = x * scale
        out = np.rint(p) / scale
        unsure = ~(np.abs(p) < 2.0 ** 52) | (np.abs(p - np.floor(p) - 0.5) <= np.abs(np.spacing(p)))
    got = out.tolist()
    for i in np.flatnonzero(unsure).tolist():
        got[i] = round(float(x[i]), digits)
    for i in others:
        got[i] = round(values[i], digits)
    return got
