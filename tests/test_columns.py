"""Grouped sums and spans over op columns (tb_attn_plugin/table/columns.py, numpy on integer ids):
exactly what one Python loop over the rows gives, keys, order, counts and float sums to the bit.
The loops below are the specification the tests hold numpy to, not a second implementation."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.table import columns
from tb_attn_plugin.table.arrays import intern


def _empty(v) -> bool:
    return v is None or (isinstance(v, str) and not v)


def _key(cols: tuple, i: int, none_as):
    if len(cols) == 1:
        v = cols[0][i]
        return none_as if _empty(v) else v
    return tuple(none_as if _empty(v := col[i]) else v for col in cols)


def _loop_sums(rows, cols, none_as, values):
    out: dict = {}
    for i in rows:
        k = _key(cols, i, none_as)
        v = values[i] if values is not None else 0.0
        if k not in out:
            out[k] = [1, 0.0 + v]
        else:
            out[k][0] += 1
            out[k][1] += v
    return out


def _loop_spans(rows, cols, none_as, ts, dur):
    out: dict = {}
    for i in rows:
        k = _key(cols, i, none_as)
        if k not in out:
            out[k] = [ts[i], ts[i] + dur[i]]
        else:
            out[k] = [min(out[k][0], ts[i]), max(out[k][1], ts[i] + dur[i])]
    return out


# Few distinct keys (so groups repeat, in runs and interleaved), stages that may be None or "".
_stage = st.sampled_from([None, "", "other", "softmax", "qk_matmul"])
_value = st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 1e16, -1e16, 2.5, 1e-300])
_row = st.tuples(st.integers(0, 3), _stage, st.booleans(), _value, _value)


def _cols(rows):
    call = [r[0] for r in rows]
    stage = [r[1] for r in rows]
    bwd = [r[2] for r in rows]
    return call, stage, bwd, array("d", [r[3] for r in rows]), array("d", [r[4] for r in rows])


def _picked(data, rows) -> list[int]:
    """Rows to visit: any of them, repeated, in any order."""
    return data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=60)) if rows else []


@settings(max_examples=300, deadline=None)
@given(st.lists(_row, max_size=40), st.data())
def test_sums_and_spans_are_the_loops(rows, data):
    call, stage, bwd, v, d = _cols(rows)
    picked = _picked(data, rows)
    for cols in ((call, stage, bwd), (stage,), (call,)):
        for values in (v, None):
            got = columns.sums(picked, cols, "other", values)
            want = _loop_sums(picked, cols, "other", values)
            assert repr(list(got.items())) == repr(list(want.items()))  # -0.0 and 0.0 too
            assert all(type(c) is int for c, _ in got.values())
        got = columns.spans(picked, cols, "other", v, d)
        assert repr(list(got.items())) == repr(list(_loop_spans(picked, cols, "other", v, d).items()))


def test_sums_add_in_row_order_from_zero():
    # 0.1 + 0.2 + 0.3 in that order, not sorted or compensated: what one loop over the ops gives.
    rows = [0, 1, 2, 3]
    got = columns.sums(rows, (["a", None, "a", ""],), "other", array("d", [0.1, 0.2, 0.3, -0.0]))
    assert got == {"a": [2, 0.1 + 0.3], "other": [2, 0.0 + 0.2 + -0.0]}
    assert list(got) == ["a", "other"]
    spans = columns.spans([2, 0], (["x", "y", "x"],), None, array("d", [5.0, 0.0, 1.0]), array("d", [1.0, 0.0, 2.0]))
    assert spans == {"x": [1.0, 6.0]}


def test_lists_and_int_values_sum_as_the_loop():
    # Python-built ops may carry int times: summed from 0.0, as the loop always did.
    got = columns.sums([0, 1], (["a", "a"],), None, [1, 2])
    assert got == {"a": [2, 3]} and type(got["a"][1]) is float  # 0.0 + 1 + 2
    assert columns.spans([0, 1], (["a", "a"],), None, [3, 1], [1, 1]) == {"a": [1, 4]}


def test_rows_outside_the_columns_are_an_error_not_a_crash():
    with pytest.raises(IndexError):
        columns.sums([5], (["a"],), None, array("d", [1.0]))
    with pytest.raises(IndexError):
        columns.sums([0], (["a"], []), None)
    with pytest.raises(IndexError):
        columns.spans([-1], (["a"],), None, array("d", [1.0]), array("d", [1.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["aten::bmm", "aten::add", "ProfilerStep#1", "", "nn.Module: A"]), max_size=50),
       st.sets(st.sampled_from(["aten::bmm", "aten::add", "ProfilerStep#1", "", "nn.Module: A"])))
def test_where_name_is_the_scan_over_every_op(names, wanted):
    from tb_attn_plugin.trace import link

    L = link.Linked(names=list(names), cats=[], shapes={}, has_args=b"", ts=[], dur=[], thread=[], threads=[],
                    parent=[], depth=[], subtree_end=[], self_cpu=[], gpu_self=[], launches_self=[], step=[],
                    node_of=[], fwd_of={}, kernels=[], steps={})
    want = [i for i, nm in enumerate(names) if nm in wanted]
    assert L.where_name(wanted.__contains__) == want
    assert L.where_name(wanted.__contains__) == want  # asked again: the cached positions are not changed
    ids, values = intern(names)
    at = columns.positions(ids, len(values))
    assert {v: rows.tolist() for v, rows in zip(values, at)} == {v: [i for i, n in enumerate(names) if n == v]
                                                                 for v in names}


@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=40), st.data())
def test_factorize_numbers_keys_by_first_appearance(rows, data):
    call, stage, bwd, _, _ = _cols(rows)
    picked = _picked(data, rows)
    ids, keys = columns.factorize(picked, (call, stage, bwd), "other")
    number: dict = {}
    want_ids = [number.setdefault(_key((call, stage, bwd), i, "other"), len(number)) for i in picked]
    assert (ids.tolist(), keys) == (want_ids, list(number))
    assert [keys[k] for k in ids] == [(call[i], stage[i] or "other", bwd[i]) for i in picked]
    # every row given as a range (link numbers the op names that way): the same as its list
    every = range(len(rows))
    assert repr(columns.factorize(every, (call, stage, bwd), "other")) == \
        repr(columns.factorize(list(every), (call, stage, bwd), "other"))


# A memory timeline's columns: sizes of every sign (and sizes whose sum passes int64), pairs, slots.
_size = st.sampled_from([0, 1, 512, -512, 7, -7, 1 << 40, -(1 << 40), (1 << 62) + 1])
_event = st.tuples(_size, st.integers(-1, 5), st.integers(-1, 3))


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=80))
def test_byte_counts_are_the_loops(events):
    delta, pair, slot = ([e[k] for e in events] for k in range(3))
    want = (sum(1 for d in delta if d > 0), sum(1 for d in delta if d == 0), sum(d for d in delta if d > 0),
            sum(1 for d, p in zip(delta, pair) if d < 0 and p < 0), sum(1 for d, p in zip(delta, pair) if d > 0 and p < 0),
            [i for i, (d, k) in enumerate(zip(delta, slot)) if d > 0 and k >= 0])
    for cols in ((delta, pair, slot), tuple(array("q", c) for c in (delta, pair, slot))):
        got = columns.byte_counts(*cols)
        assert got == want
        # the bytes allocated are an exact int, past int64 too
        assert type(got[2]) is int and all(type(x) is int for x in got[:5])


def test_byte_counts_refuse_mismatched_columns():
    with pytest.raises(ValueError):
        columns.byte_counts(array("q", [1, 2]), array("q", [1]), array("q", [0, 0]))
    assert columns.byte_counts([5, -5], [1, 0], [0, -1]) == (1, 0, 5, 0, 0, [0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([-1, 0, 1, 2, 3547]), _value), max_size=80))
def test_masked_sums_are_the_loop(rows):
    mask, keys, values = bytes(r[0] for r in rows), [r[1] for r in rows], array("d", [r[2] for r in rows])
    total, per_key = 0.0, {}
    for on, k, v in zip(mask, keys, values):
        if on:
            total += v
            per_key[k] = per_key.get(k, 0.0) + v
    got = columns.masked_sums(mask, keys, values)
    assert repr(got) == repr((total, per_key))  # the same floats to the bit (-0.0 included), keys in the same order
    # keys as an int64 column (metrics' step of each kernel) give the same, the keys Python ints
    got = columns.masked_sums(mask, np.array(keys, np.int64), values)
    assert repr(got) == repr((total, per_key)) and all(type(k) is int for k in got[1])


def test_masked_sums_refuse_mismatched_columns():
    with pytest.raises(ValueError):
        columns.masked_sums(b"\x01\x01", [0], array("d", [1.0, 2.0]))


@given(st.lists(st.integers(-3, 3) | st.sampled_from([1 << 70, -(1 << 70)]), max_size=60))
def test_nonnegative_is_the_comparison(values):
    assert columns.nonnegative(values) == [i for i, v in enumerate(values) if v >= 0]


def test_nonnegative_compares_what_is_not_an_int_as_python_does():
    assert columns.nonnegative([0, 1.5, -2.0, True, -1]) == [0, 1, 3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["aten::view", "aten::mm", "", "aten::t"]), _value), max_size=60),
       st.data())
def test_picked_is_the_filter(rows, data):
    keys, values = [r[0] for r in rows], array("d", [r[1] for r in rows])
    visit = _picked(data, rows)
    wanted = frozenset({"aten::view", "aten::t"})
    ids, names = intern(keys)
    c = columns.picked(visit, ids, np.array([n in wanted for n in names], bool), values)
    assert repr(c) == repr([values[i] for i in visit if keys[i] in wanted])


def test_picked_refuses_rows_outside_the_columns():
    with pytest.raises(IndexError):
        columns.picked([3], np.zeros(1, np.int64), np.ones(1, bool), array("d", [1.0]))


def _loop_pairs(delta, addr, stream):
    pair = [-1] * len(delta)
    open_: dict = {}
    for i, (d, key) in enumerate(zip(delta, zip(addr, stream))):
        if d > 0:
            open_[key] = i
        elif d < 0:
            j = open_.pop(key, -1)
            if j >= 0:
                pair[i], pair[j] = j, i
    return pair


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([512, -512, 0, 7, -7]), st.integers(0, 3) | st.just(1 << 70),
                          st.integers(0, 1)), max_size=80))
def test_pairs_are_the_loop_over_open_addresses(events):
    # few addresses and streams: allocations of an open address, frees of nothing, zero sizes abound
    delta, addr, stream = ([e[k] for e in events] for k in range(3))
    c = columns.pairs(delta, addr, stream).tolist()
    assert c == _loop_pairs(delta, addr, stream)
    for i, j in enumerate(c):  # a pair is an allocation and a later free of its address, both ways
        assert j < 0 or (c[j] == i and delta[min(i, j)] > 0 > delta[max(i, j)] and addr[i] == addr[j])


def test_pairs_refuse_mismatched_columns():
    with pytest.raises(ValueError):
        columns.pairs(array("q", [1, -1]), array("q", [0]), array("q", [0, 0]))


# Values near a rounding tie (k + 0.5 thousandths, a few ulps either side), any double, and the
# special ones: what round() makes of each, to the bit and to the type.
_tie = st.builds(lambda k, eps: (k + 0.5) / 1000 + eps, st.integers(-10**12, 10**12),
                 st.sampled_from([0.0, 1e-12, -1e-12, 5e-17, -5e-17]))
_any_float = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(_tie | _any_float | st.integers(-10**20, 10**20) | st.booleans(), max_size=60),
       st.sampled_from([0, 1, 3, 6]))
def test_rounded_is_round_of_each(values, digits):
    got = columns.rounded(values, digits)
    want = [round(v, digits) for v in values]
    assert [(type(g), repr(g)) for g in got] == [(type(w), repr(w)) for w in want]
    floats_only = [v for v in values if type(v) is float]
    assert list(map(repr, columns.rounded(array("d", floats_only), digits))) == \
        [repr(round(v, digits)) for v in floats_only]
