"""Grouped sums and spans over op columns (tb_attn_plugin/trace/columns.py): the C helper
(_columns.c) gives exactly what the Python loops give, keys, order, counts and float sums."""

from __future__ import annotations

import os
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.trace import columns

needs_c = pytest.mark.skipif(columns._c is None and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                             reason="trace/_columns.c is not built (no compiler at install time)")


def test_the_helper_is_built_where_required():
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert columns._c is not None, "tb_attn_plugin/trace/_columns.c was not compiled (pip install -e . needs gcc)"


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


def _python(fn, *args):
    c, columns._c = columns._c, None
    try:
        return fn(*args)
    finally:
        columns._c = c


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(_row, max_size=40), st.data())
def test_sums_and_spans_are_the_python_loops(rows, data):
    call, stage, bwd, v, d = _cols(rows)
    picked = _picked(data, rows)
    for cols in ((call, stage, bwd), (stage,), (call,)):
        for values in (v, None):
            got = columns.sums(picked, cols, "other", values)
            want = _python(columns.sums, picked, cols, "other", values)
            assert repr(list(got.items())) == repr(list(want.items()))  # -0.0 and 0.0 too
            assert all(type(c) is int for c, _ in got.values())
        got = columns.spans(picked, cols, "other", v, d)
        assert repr(list(got.items())) == repr(list(_python(columns.spans, picked, cols, "other", v, d).items()))


def test_sums_add_in_row_order_from_zero():
    # 0.1 + 0.2 + 0.3 in that order, not sorted or compensated: what one loop over the ops gives.
    rows = [0, 1, 2, 3]
    got = columns.sums(rows, (["a", None, "a", ""],), "other", array("d", [0.1, 0.2, 0.3, -0.0]))
    assert got == {"a": [2, 0.1 + 0.3], "other": [2, 0.0 + 0.2 + -0.0]}
    assert list(got) == ["a", "other"]
    spans = columns.spans([2, 0], (["x", "y", "x"],), None, array("d", [5.0, 0.0, 1.0]), array("d", [1.0, 0.0, 2.0]))
    assert spans == {"x": [1.0, 6.0]}


def test_lists_and_int_values_take_the_python_loop():
    # Python-built ops may carry int times: summed as ints, as the loop always did.
    got = columns.sums([0, 1], (["a", "a"],), None, [1, 2])
    assert got == {"a": [2, 3]} and type(got["a"][1]) is float  # 0.0 + 1 + 2
    assert columns.spans([0, 1], (["a", "a"],), None, [3, 1], [1, 1]) == {"a": [1, 4]}


@needs_c
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

    L = link.Linked(ops=[], ts=[], dur=[], thread=[], threads=[], parent=[], depth=[], subtree_end=[], self_cpu=[],
                    gpu_self=[], launches_self=[], step=[], node_of=[], fwd_of={}, kernels=[], steps={},
                    _names=list(names))
    want = [i for i, nm in enumerate(names) if nm in wanted]
    assert L.where_name(wanted.__contains__) == want == link._where(columns.positions(names), wanted.__contains__)
    assert L.where_name(wanted.__contains__) == want  # asked again: the cached positions are not changed
    assert columns.positions(names) == _python(columns.positions, names)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=40), st.data())
def test_factorize_is_the_python_loop(rows, data):
    call, stage, bwd, _, _ = _cols(rows)
    picked = _picked(data, rows)
    ids, keys = columns.factorize(picked, (call, stage, bwd), "other")
    want_ids, want_keys = _python(columns.factorize, picked, (call, stage, bwd), "other")
    assert (list(ids), keys) == (list(want_ids), want_keys)
    assert [keys[k] for k in ids] == [(call[i], stage[i] or "other", bwd[i]) for i in picked]


def _without_c(call):
    """call() with the Python loops of columns.py, not the C helper."""
    saved, columns._c = columns._c, None
    try:
        return call()
    finally:
        columns._c = saved


# A memory timeline's columns: sizes of every sign (and sizes whose sum passes int64), pairs, slots.
_size = st.sampled_from([0, 1, 512, -512, 7, -7, 1 << 40, -(1 << 40), (1 << 62) + 1])
_event = st.tuples(_size, st.integers(-1, 5), st.integers(-1, 3))


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=80))
def test_byte_counts_are_the_python_loop(events):
    delta, pair, slot = (array("q", [e[k] for e in events]) for k in range(3))
    c = columns.byte_counts(delta, pair, slot)
    python = _without_c(lambda: columns.byte_counts(list(delta), list(pair), list(slot)))
    assert c == python
    # the bytes allocated are an exact int, past int64 too (the C helper hands those to Python)
    assert c[2] == sum(d for d, _, _ in events if d > 0) and type(c[2]) is int


@needs_c
def test_byte_counts_refuse_mismatched_or_mistyped_columns():
    with pytest.raises(ValueError):
        columns._c.byte_counts(array("q", [1, 2]), array("q", [1]), array("q", [0, 0]))
    with pytest.raises(TypeError):
        columns._c.byte_counts(array("d", [1.0]), array("q", [1]), array("q", [0]))
    # the wrapper takes the Python loop for anything but three int64 arrays of one length
    assert columns.byte_counts([5, -5], [1, 0], [0, -1]) == (1, 0, 5, 0, 0, [0])


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([-1, 0, 1, 2, 3547]), _value), max_size=80))
def test_masked_sums_are_the_python_loop(rows):
    mask, keys, values = bytes(r[0] for r in rows), [r[1] for r in rows], array("d", [r[2] for r in rows])
    c = columns.masked_sums(mask, keys, values)
    python = _without_c(lambda: columns.masked_sums(mask, keys, values))
    assert repr(c) == repr(python)  # the same floats to the bit (-0.0 included), keys in the same order
    assert list(c[1]) == list(dict.fromkeys(k for on, k, _ in rows if on))


@needs_c
def test_masked_sums_refuse_mismatched_columns():
    with pytest.raises(ValueError):
        columns._c.masked_sums(b"\x01\x01", [0], array("d", [1.0, 2.0]))
    with pytest.raises(TypeError):
        columns._c.masked_sums(b"\x01", [0], array("q", [1]))


@needs_c
@given(st.lists(st.integers(-3, 3) | st.sampled_from([1 << 70, -(1 << 70)]), max_size=60))
def test_nonnegative_is_the_python_loop(values):
    want = [i for i, v in enumerate(values) if v >= 0]
    assert columns.nonnegative(values) == want == columns._c.nonnegative(values)


def test_nonnegative_leaves_what_is_not_an_int_to_the_python_loop():
    assert columns.nonnegative([0, 1.5, -2.0, True, -1]) == [0, 1, 3]
    if columns._c is not None:
        with pytest.raises(TypeError):
            columns._c.nonnegative([0, 1.5])


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["aten::view", "aten::mm", "", "aten::t"]), _value), max_size=60),
       st.data())
def test_picked_is_the_python_loop(rows, data):
    keys, values = [r[0] for r in rows], array("d", [r[1] for r in rows])
    visit = _picked(data, rows)
    wanted = frozenset({"aten::view", "aten::t"})
    c = columns.picked(visit, keys, wanted, values)
    assert repr(c) == repr([values[i] for i in visit if keys[i] in wanted])


@needs_c
def test_picked_refuses_rows_outside_the_columns():
    with pytest.raises(IndexError):
        columns._c.picked([3], ["a"], {"a"}, array("d", [1.0]))
    with pytest.raises(TypeError):
        columns._c.picked([0], ["a"], ["a"], array("d", [1.0]))


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([512, -512, 0, 7, -7]), st.integers(0, 3), st.integers(0, 1)), max_size=80))
def test_pairs_are_the_python_loop(events):
    # few addresses and streams: allocations of an open address, frees of nothing, zero sizes abound
    delta, addr, stream = (array("q", [e[k] for e in events]) for k in range(3))
    c = columns.pairs(delta, addr, stream)
    python = _without_c(lambda: columns.pairs(delta, addr, stream))
    assert c == python
    for i, j in enumerate(c):  # a pair is an allocation and a later free of its address, both ways
        assert j < 0 or (c[j] == i and delta[min(i, j)] > 0 > delta[max(i, j)] and addr[i] == addr[j])


@needs_c
def test_pairs_refuse_mismatched_columns():
    with pytest.raises(ValueError):
        columns._c.pairs(array("q", [1, -1]), array("q", [0]), array("q", [0, 0]))
