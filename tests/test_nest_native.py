"""The C op tree (tb_attn_plugin/trace/_nest.c) is link._nest_python at C speed: for any times,
ties and launches, the same order, parents, subtree ends, depths, self times and launch ops."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import link
from tb_attn_plugin.trace.events import Args, Event, Events
from tb_attn_plugin.trace.memory_records import MemoryEvents
from tests.conftest import shared_trace

needs_nest = pytest.mark.skipif(link._c_nest is None and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                                reason="the C op tree is not built (no compiler at install time)")


def test_the_op_tree_is_built_where_required():
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert link._c_nest is not None, "tb_attn_plugin/trace/_nest.c was not compiled (pip install -e . needs gcc)"


# Few distinct values, so equal starts, equal ends and launches at an op's very start or end abound.
_t = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 1e9, 1e9 + 0.25])
_d = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, 1e-9, 3.5])


def _same(tops, tl, base):
    py = link._nest_python(tops, tl, base)
    got = link._nest(tops, tl, base)
    assert [id(e) for e in got[0]] == [id(e) for e in py[0]]
    for a, b in zip(got[1:5], py[1:5]):
        assert list(a) == list(b)
    assert got[5] == py[5]
    # the start and duration columns follow the order (Linked.ts and Linked.dur are made of them)
    assert list(got[6]) == [e.ts for e in py[0]] and list(got[7]) == [e.dur for e in py[0]]


@needs_nest
@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_t, _d), max_size=40), st.lists(_t, max_size=20), st.integers(0, 1000))
def test_nest_is_the_python_loop(ops, launches, base):
    tops = [Event(ph="X", cat="cpu_op", name=f"op{i}", ts=t, dur=d) for i, (t, d) in enumerate(ops)]
    tl = [Event(ph="X", cat="cuda_runtime", name=f"l{i}", ts=t) for i, t in enumerate(launches)]
    _same(tops, tl, base)


@needs_nest
@pytest.mark.parametrize("layout", ["nested", "shuffled", "sorted", "reversed"])
def test_many_ops_sort_and_nest_as_the_python_loop(layout):
    # Thousands of ops: the C sort's insertion runs and several merge levels (and their "already in
    # order" shortcut), in the orders files come in: ops after their children (kineto), random,
    # already sorted, backwards; with ties of start and duration everywhere.
    import random

    rnd = random.Random(layout)
    spans = sorted(((rnd.choice([0.0, 1.0, 2.5]) + rnd.randrange(2000) / 4, rnd.choice([0.0, 0.25, 1.0, 8.0, 40.0]))
                    for _ in range(5000)), key=lambda td: td[0] + td[1])  # by end: children first
    if layout == "shuffled":
        rnd.shuffle(spans)
    elif layout == "sorted":
        spans.sort(key=lambda td: (td[0], -td[1]))
    elif layout == "reversed":
        spans.sort(key=lambda td: (td[0], -td[1]), reverse=True)
    tops = [Event(ph="X", cat="cpu_op", name=f"op{i}", ts=t, dur=d) for i, (t, d) in enumerate(spans)]
    tl = [Event(ph="X", cat="cuda_runtime", name=f"l{i}", ts=rnd.randrange(2000) / 4) for i in range(700)]
    _same(tops, tl, 17)


@needs_nest
def test_int_and_nan_times_take_the_python_loop():
    # Python-built events may carry ints (kept as ints in the sums) or NaN (no order): both go to
    # the Python loop, which gives what it always gave.
    tops = [Event(ph="X", cat="cpu_op", name="a", ts=0, dur=5), Event(ph="X", cat="cpu_op", name="b", ts=1, dur=2)]
    got = link._nest(tops, [], 0)
    assert got[4] == [3, 2] and all(type(x) is int for x in got[4])
    nan = [Event(ph="X", cat="cpu_op", name="a", ts=float("nan"), dur=1.0)]
    assert list(link._nest(nan, [], 0)[1]) == [-1]


@needs_nest
@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_bert_small_sdpa_aotriton",
                                  "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph", "hta_a100_negative_log_softmax_fwdbwd"])
def test_real_traces_give_the_same_report(monkeypatch, name):
    path = str(shared_trace(name))
    fast = analyze_file(path)
    monkeypatch.setattr(link, "_c_nest", None)
    monkeypatch.setattr(link, "_c_kept", None)
    slow = analyze_file(path)
    fast.pop("analysis_seconds")
    slow.pop("analysis_seconds")
    assert fast == slow



def _events(ops, launches) -> Events:
    return Events(ops=ops, launches=launches, gpu=[], flows=[], memory=MemoryEvents(), device_properties=[],
                  distributed={}, tb_attn=None, total_events=len(ops) + len(launches), warnings=[])


# Threads as decoders give them: int and string ids (never compared with each other), repeated.
_thread = st.sampled_from([(1, 1), (1, 2), (2, 1), ("1", 1), (7, "gpu"), (1, 1)])


def _tree_lists(got):
    ops, *cols, threads, launch_op = got[:10]  # order and cpu: the C path's alone
    return [id(e) for e in ops], [list(c) for c in cols], threads, list(launch_op)


@needs_nest
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_thread, _t, _d), max_size=60), st.lists(st.tuples(_thread, _t), max_size=30))
def test_all_threads_at_once_is_the_per_thread_loop(ops, launches):
    # Fresh id objects per event, as a decoder without _Kept's sharing makes them.
    ev = _events([Event(ph="X", cat="cpu_op", name=f"op{i}", pid=p, tid=t, ts=ts, dur=d)
                  for i, ((p, t), ts, d) in enumerate(ops)],
                 [Event(ph="X", cat="cuda_runtime", name=f"l{i}", pid=p, tid=t, ts=ts)
                  for i, ((p, t), ts) in enumerate(launches)])
    fast = link._tree_native(ev)
    assert fast is not None
    assert _tree_lists(fast) == _tree_lists(link._tree_by_thread(ev))


@needs_nest
def test_all_threads_at_once_leaves_int_and_nan_times_to_the_per_thread_loop():
    for bad in (dict(ts=1), dict(dur=2), dict(ts=float("nan")), dict(dur=float("nan"))):
        e = Event(ph="X", cat="cpu_op", name="a", **({"ts": 0.0, "dur": 1.0} | bad))
        assert link._tree_native(_events([Event(ph="X", cat="cpu_op", name="b", ts=0.0, dur=3.0), e], [])) is None
        assert link._tree_native(_events([], [e])) is None
    ok = link._tree_by_thread(_events([Event(ph="X", cat="cpu_op", name="a", ts=0, dur=5)], []))
    assert list(ok[4]) == [5] and type(ok[4][0]) is int


@needs_nest
def test_arg_values_is_the_python_loop(monkeypatch):
    evs = [Event(name="a", args=Args(seq=3, correlation=0)), Event(name="b"), Event(name="c", args=Args()),
           Event(name="d", args=Args(seq=0)), Event(name="e", args=Args(seq=-1, correlation=9))]
    want = {"seq": ([0, 3, 4], [3, 0, -1]), "correlation": ([0, 4], [0, 9]), "external_id": ([], [])}
    for attr, expected in want.items():
        assert tuple(link._arg_values(evs, attr)) == expected
        monkeypatch.setattr(link, "_c_kept", None)
        assert tuple(link._arg_values(evs, attr)) == expected
        monkeypatch.undo()


@needs_nest
def test_nest_all_refuses_threads_outside_its_tables():
    from array import array

    one = array("d", [0.0])
    for th, rank in ((array("q", [1]), None), (array("q", [0]), array("q", [5])), (array("q", [2]), array("q", [0]))):
        extra = () if rank is None else (rank, array("q"))
        with pytest.raises(ValueError):
            link._c_nest.nest_all(th, one, one, 1, array("q"), array("d"), *extra)
    with pytest.raises(ValueError):  # a rank table for one list only
        link._c_nest.nest_all(array("q", [0]), one, one, 1, array("q"), array("d"), array("q", [0]))


@needs_nest
def test_nest_all_puts_flags_and_lists_in_tree_order_and_refuses_other_lengths():
    from array import array

    ts, dur = array("d", [5.0, 0.0, 2.0]), array("d", [1.0, 10.0, 1.0])  # tree order: 1, 2, 0
    th, none = array("q", [0, 0, 0]), array("d")
    got = link._c_nest.nest_all(th, ts, dur, 1, array("q"), none, array("q", [0]), array("q"), b"abc",
                                (["x", "y", "z"], [10, 11, 12]))
    assert list(array("q", got[0])) == [1, 2, 0]
    assert got[9] == b"bca" and got[10] == (["y", "z", "x"], [11, 12, 10])
    only_lists = link._c_nest.nest_all(th, ts, dur, 1, array("q"), none, array("q", [0]), array("q"), None, (["x", "y", "z"],))
    assert len(only_lists) == 10 and only_lists[9] == (["y", "z", "x"],)
    for flags, lists in ((b"ab", ()), (None, (["x"],)), (None, ("xyz",))):
        with pytest.raises(ValueError):
            link._c_nest.nest_all(th, ts, dur, 1, array("q"), none, array("q", [0]), array("q"), flags, lists)


@needs_nest
def test_nest_all_writes_into_out_arrays_as_it_returns_bytes_and_refuses_wrong_ones():
    from array import array

    ts, dur = array("d", [5.0, 0.0, 2.0, 2.0]), array("d", [1.0, 10.0, 1.0, 0.5])
    th, lth, lts = array("q", [0, 0, 0, 0]), array("q", [0]), array("d", [2.2])
    rank = (array("q", [0]), array("q", [0]))
    plain = link._c_nest.nest_all(th, ts, dur, 1, lth, lts, *rank)
    q, d = array("q", [0]), array("d", [0.0])
    out = (q * 4, q * 4, q * 4, q * 4, d * 4, d * 4, d * 4, q * 4, q * 1)
    got = link._c_nest.nest_all(th, ts, dur, 1, lth, lts, *rank, None, (), out)
    assert all(a is b for a, b in zip(got, out))
    assert [bytes(a) for a in out] == list(plain)
    for bad in (out[:8], out[:4] + (q * 4,) + out[5:], out[:8] + (q * 2,), out[:1] + (bytes(32),) + out[2:]):
        with pytest.raises((ValueError, TypeError, BufferError)):
            link._c_nest.nest_all(th, ts, dur, 1, lth, lts, *rank, None, (), bad)
