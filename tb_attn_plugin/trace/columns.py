"""Sums and spans of op columns per group (a call's stage and pass, a step, an op name), where each
op name occurs, and a memory timeline's byte counts: the loops the metrics, the roofline timing,
the memory section and Linked.where_name share, at C speed when _columns.c is built."""

from __future__ import annotations

from array import array
from itertools import compress, repeat
from operator import ge
from typing import Any, Sequence

try:
    from . import _columns as _c
except ImportError:
    _c = None


def _empty(v) -> bool:
    return v is None or (isinstance(v, str) and not v)


def _key(cols: tuple, i: int, none_as: Any):
    if len(cols) == 1:
        v = cols[0][i]
        return none_as if _empty(v) else v
    return tuple(none_as if _empty(v := col[i]) else v for col in cols)


def sums(rows: list[int], cols: tuple, none_as: Any = None, values: Sequence[float] | None = None) -> dict:
    """For each row (an op index) in order, its key: the row's item of the one column in ``cols``,
    or the tuple of their items, None and "" read as ``none_as`` (as ``stage or "other"``). Returns key -> [count, sum of
    values[row]] (summed from 0.0 in row order), keys in order of first appearance."""
    if _c is not None and all(type(c) is list for c in cols) and (values is None or _is_doubles(values)):
        return _c.sums(rows, cols, none_as, values)
    out: dict = {}
    for i in rows:
        k = _key(cols, i, none_as)
        got = out.get(k)
        v = values[i] if values is not None else 0.0
        if got is None:
            out[k] = [1, 0.0 + v]
        else:
            got[0] += 1
            got[1] += v
    return out


def spans(rows: list[int], cols: tuple, none_as: Any, ts: Sequence[float], dur: Sequence[float]) -> dict:
    """Keys as in sums; key -> [least ts[row], greatest ts[row] + dur[row]]."""
    if _c is not None and all(type(c) is list for c in cols) and _is_doubles(ts) and _is_doubles(dur):
        return _c.spans(rows, cols, none_as, ts, dur)
    out: dict = {}
    for i in rows:
        k = _key(cols, i, none_as)
        got = out.get(k)
        t = ts[i]
        if got is None:
            out[k] = [t, t + dur[i]]
        else:
            got[0] = min(got[0], t)
            got[1] = max(got[1], t + dur[i])
    return out


def factorize(rows: list[int], cols: tuple, none_as: Any = None) -> tuple[Sequence[int], list]:
    """Keys as in sums: each row's key as a number, and the keys by number (first appearance first)."""
    if _c is not None and all(type(c) is list for c in cols):
        ids, keys = _c.factorize(rows, cols, none_as)
        return array("q", ids), keys
    number: dict = {}
    ids = [number.setdefault(_key(cols, i, none_as), len(number)) for i in rows]
    return ids, list(number)


def positions(keys: list) -> dict:
    """Each distinct key -> the ascending list of its positions in ``keys``, keys in order of first
    appearance."""
    if _c is not None and type(keys) is list:
        return _c.positions(keys)
    out: dict = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return out


def _is_doubles(v) -> bool:
    return isinstance(v, array) and v.typecode == "d"


def pairs(delta: Sequence[int], addr: Sequence[int], stream: Sequence[int]) -> array:
    """Each allocation (delta > 0) paired with the next free (delta < 0) of its address on its stream
    (an allocation of an address still open replaces it): per event, its pair's index or -1."""
    if _c is not None and all(_is_int64s(c) for c in (delta, addr, stream)) and len(delta) == len(addr) == len(stream):
        return array("q", _c.pairs(delta, addr, stream))
    n = len(delta)
    pair = array("q", [-1]) * n
    open_: dict[tuple[int, int], int] = {}
    for i, d, key in zip(range(n), delta, zip(addr, stream)):
        if d > 0:
            open_[key] = i
        elif d < 0:
            j = open_.pop(key, -1)
            if j >= 0:
                pair[i] = j
                pair[j] = i
    return pair


def picked(rows: list[int], keys: list, wanted: frozenset | set, values: Sequence[float]) -> list[float]:
    """values[row] for the rows (in order) whose key is in ``wanted``."""
    if _c is not None and type(rows) is list and type(keys) is list and _is_doubles(values):
        return _c.picked(rows, keys, wanted, values)
    return list(map(values.__getitem__, compress(rows, map(wanted.__contains__, map(keys.__getitem__, rows)))))


def nonnegative(values: list[int]) -> list[int]:
    """The positions (ascending) of the values >= 0."""
    if _c is not None and type(values) is list:
        try:
            return _c.nonnegative(values)
        except TypeError:  # an item that is not an int: the loop below compares as Python does
            pass
    return list(compress(range(len(values)), map(ge, values, repeat(0))))


def masked_sums(mask: Sequence[int], keys: list, values: Sequence[float]) -> tuple[float, dict]:
    """Over the rows whose mask is true, in row order: (the sum of their values from 0.0, key ->
    the sum of its rows' values from 0.0, keys in order of first appearance)."""
    if _c is not None and isinstance(mask, (bytes, bytearray)) and type(keys) is list and _is_doubles(values):
        return _c.masked_sums(mask, keys, values)
    total, out = 0.0, {}
    for on, k, v in zip(mask, keys, values):
        if on:
            total += v
            out[k] = out.get(k, 0.0) + v
    return total, out


def byte_counts(delta: Sequence[int], pair: Sequence[int], slot: Sequence[int]) -> tuple[int, int, int, int, int, list[int]]:
    """A memory timeline's (allocations, events of no size, bytes allocated, frees of no allocation,
    allocations never freed, the indices of the allocations inside some call: slot >= 0)."""
    if _c is not None and all(_is_int64s(c) for c in (delta, pair, slot)) and len(delta) == len(pair) == len(slot):
        got = _c.byte_counts(delta, pair, slot)
        if got is not None:
            allocs, zeros, allocated, unpaired, live_end, inside = got
            return allocs, zeros, allocated, unpaired, live_end, array("q", inside).tolist()
    allocs = sum(1 for d in delta if d > 0)
    zeros = sum(1 for d in delta if d == 0)
    allocated = sum(d for d in delta if d > 0)
    unpaired = sum(1 for d, p in zip(delta, pair) if d < 0 and p < 0)
    live_end = sum(1 for d, p in zip(delta, pair) if d > 0 and p < 0)
    inside = [i for i, (d, k) in enumerate(zip(delta, slot)) if d > 0 and k >= 0]
    return allocs, zeros, allocated, unpaired, live_end, inside


def _is_int64s(v) -> bool:
    return isinstance(v, array) and v.typecode == "q"
