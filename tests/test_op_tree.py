"""The op tree (trace/link.op_tree: numpy sorts, then the one stack pass of _scanner.nest_sorted):
for any times, ties, threads, launches and ops that overlap without nesting, what one loop over each
thread's ops sorted by (start, -duration) gives: the order, parents, subtree ends, depths, self times
and launch ops. The loop below is the specification the tests hold the engine to."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.trace import launch_config, link, native
from tb_attn_plugin.trace.events import CATS, GPU_FIELDS, LAUNCH_FIELDS, OP_FIELDS, Args, Event, Events
from tb_attn_plugin.table.arrays import Names
from tb_attn_plugin.trace.records import Table


def test_the_tree_pass_is_built_where_required():
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert native.nest_sorted is not native._nest_sorted_python, \
            "tb_attn_plugin/trace/_scanner.c was not compiled (pip install -e . needs gcc)"


# Few distinct values, so equal starts, equal ends and launches at an op's very start or end abound.
_t = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 1e9, 1e9 + 0.25])
_d = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, 1e-9, 3.5])
# Threads as decoders give them: int and string ids (never compared with each other), repeated.
_thread = st.sampled_from([(1, 1), (1, 2), (2, 1), ("1", 1), (7, "gpu"), (1, 1)])


def _events(ops, launches) -> Events:
    names, launch_names = Names(), Names()
    names.add([e.name for e in ops])
    launch_names.add([e.name for e in launches])
    return Events(op_table=Table.of(ops, OP_FIELDS, CATS), op_names=names, op_shapes={},
                  launch_table=Table.of(launches, LAUNCH_FIELDS, CATS), launch_names=launch_names,
                  gpu_table=Table.of([], GPU_FIELDS, CATS), gpu_names=Names(), gpu_config=launch_config.of([]),
                  flows=[], memory=[], device_properties=[], distributed={}, tb_attn=None,
                  total_events=len(ops) + len(launches), warnings=[])


def _launch_events(ev: Events) -> list[Event]:
    """The launches as events again, from their columns (what the loop below walks)."""
    t = ev.launch_table
    return [Event(ph="X", cat="cuda_runtime", name=ev.launch_name(j), pid=p, tid=q, ts=ts)
            for j, (p, q, ts) in enumerate(zip(t["pid"].tolist(), t["tid"].tolist(), t["ts"].tolist()))]


def _loop_tree(ev: Events):
    """Per thread (threads ordered by str(pid), str(tid)): ops sorted by (start, -duration), a stack
    of open ops popped when an op or launch starts at or past their end."""
    key = lambda e: (e.pid, e.tid)  # noqa: E731
    file_ops, launches = ev.op_events(), _launch_events(ev)
    at = {id(e): i for i, e in enumerate(file_ops)}  # each op's position in the file
    threads = sorted({key(e) for e in file_ops} | {key(e) for e in launches}, key=lambda k: (str(k[0]), str(k[1])))
    ops, parent, subtree_end, depth, launch_op = [], [], [], [], {}
    for th in threads:
        tops = sorted((e for e in file_ops if key(e) == th), key=lambda e: (e.ts, -e.dur))
        tl = sorted((e for e in launches if key(e) == th), key=lambda e: e.ts)
        base, n = len(ops), len(tops)
        par, send, dep = [-1] * n, [base + n] * n, [0] * n
        stack, ends, li = [], [], 0

        def pop_to(t, at):
            while ends and ends[-1] <= t:
                send[stack.pop() - base] = at
                ends.pop()

        for k, e in enumerate(tops):
            while li < len(tl) and tl[li].ts < e.ts:
                pop_to(tl[li].ts, base + k)
                launch_op[id(tl[li])] = stack[-1] if stack else -1
                li += 1
            pop_to(e.ts, base + k)
            par[k], dep[k] = (stack[-1] if stack else -1), len(stack)
            stack.append(base + k)
            ends.append(e.ts + e.dur)
        for la in tl[li:]:
            pop_to(la.ts, base + n)
            launch_op[id(la)] = stack[-1] if stack else -1
        ops += tops
        parent += par
        subtree_end += send
        depth += dep
    self_cpu = [e.dur for e in ops]
    for k, p in enumerate(parent):
        if p >= 0:
            self_cpu[p] -= ops[k].dur
    self_cpu = [s if s > 0 else 0.0 for s in self_cpu]
    return ([at[id(e)] for e in ops], parent, subtree_end, depth, self_cpu, [e.ts for e in ops], [e.dur for e in ops],
            threads, [launch_op[id(la)] for la in launches])


def _tree(ev: Events):
    t = link.op_tree(ev)
    return (t.order.tolist(), list(t.parent), list(t.subtree_end), list(t.depth), list(t.self_cpu),
            list(t.ts), list(t.dur), t.threads, list(t.launch_op))


def _both_passes(ev: Events):
    """The tree from the C pass and from the Python pass of an install without a compiler."""
    got = _tree(ev)
    saved, native.nest_sorted = native.nest_sorted, native._nest_sorted_python
    try:
        assert _tree(ev) == got
    finally:
        native.nest_sorted = saved
    return got


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_thread, _t, _d), max_size=60), st.lists(st.tuples(_thread, _t), max_size=30))
def test_the_tree_is_the_loop(ops, launches):
    # Fresh id objects per event, as a decoder without _Kept's sharing makes them.
    ev = _events([Event(ph="X", cat="cpu_op", name=f"op{i}", pid=p, tid=t, ts=ts, dur=d)
                  for i, ((p, t), ts, d) in enumerate(ops)],
                 [Event(ph="X", cat="cuda_runtime", name=f"l{i}", pid=p, tid=t, ts=ts)
                  for i, ((p, t), ts) in enumerate(launches)])
    assert repr(_both_passes(ev)) == repr(_loop_tree(ev))  # self times to the bit, -0.0 included


@pytest.mark.parametrize("layout", ["nested", "shuffled", "sorted", "reversed"])
def test_many_ops_sort_and_nest_as_the_loop(layout):
    # Thousands of ops in the orders files come in: ops after their children (kineto), random,
    # already sorted, backwards; with ties of start and duration everywhere, and windows that
    # overlap without nesting.
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
    ev = _events([Event(ph="X", cat="cpu_op", name=f"op{i}", ts=t, dur=d) for i, (t, d) in enumerate(spans)],
                 [Event(ph="X", cat="cuda_runtime", name=f"l{i}", ts=rnd.randrange(2000) / 4) for i in range(700)])
    assert _both_passes(ev) == _loop_tree(ev)


def test_overlapping_ops_close_as_a_stack_does():
    # b starts inside a and ends after it: c, after a's end but inside b, is b's child, and a stays
    # open under b until b closes (an op closes when the ops opened after it have).
    ev = _events([Event(ph="X", cat="cpu_op", name=n, ts=t, dur=d)
                  for n, t, d in (("a", 0.0, 10.0), ("b", 5.0, 10.0), ("c", 12.0, 1.0), ("d", 16.0, 1.0))], [])
    got = _both_passes(ev)
    assert got[1:4] == ([-1, 0, 1, -1], [3, 3, 3, 4], [0, 1, 2, 0])


def test_int_times_are_floats_in_the_tree():
    # Python-built events may carry int times: the columns are float64, the self times too.
    ev = _events([Event(ph="X", cat="cpu_op", name="a", ts=0, dur=5), Event(ph="X", cat="cpu_op", name="b", ts=1, dur=2)], [])
    t = link.op_tree(ev)
    assert list(t.self_cpu) == [3.0, 2.0] and list(t.parent) == [-1, 0] and type(t.ts[0]) is float


def test_arg_columns_of_events_are_what_a_loop_reads():
    # Table.of reads decoded events as the scanner's records read them: whether args hold each int
    # member (None and no args: not), its value, and the category's id (unknown: -1).
    evs = [Event(name="a", cat="cuda_runtime", args=Args(seq=3, correlation=0)), Event(name="b", cat="x"),
           Event(name="c", args=Args()), Event(name="d", cat="cpu_op", args=Args(seq=0)),
           Event(name="e", args=Args(seq=-1, correlation=9))]
    t = Table.of(evs, LAUNCH_FIELDS + ("seq", "cat"), CATS)
    for attr in ("seq", "correlation", "external_id"):
        at = [i for i, e in enumerate(evs) if e.args is not None and getattr(e.args, attr) is not None]
        assert np.flatnonzero(t.has(attr)).tolist() == at
    assert t["correlation"][t.has("correlation")].tolist() == [0, 9]
    assert t["seq"][t.has("seq")].tolist() == [3, 0, -1]
    assert t["cat"].tolist() == [CATS.index(e.cat) if e.cat in CATS else -1 for e in evs]


def test_by_correlation_a_later_launch_wins():
    launches = [Event(ph="X", cat="cuda_runtime", name="l", ts=float(i), args=Args(correlation=c))
                for i, c in enumerate((5, 6, 5, None))]
    assert link.launches_by_correlation(_events([], launches)) == {5: 2, 6: 1}


@pytest.mark.skipif(native.nest_sorted is native._nest_sorted_python, reason="_scanner.c is not built")
def test_the_pass_refuses_buffers_that_do_not_fit():
    f, q = (lambda *v: np.array(v, np.float64)), (lambda *v: np.array(v, np.int64))
    out = lambda n: np.zeros(n, np.int64)  # noqa: E731
    ok = (f(0.0, 1.0), f(5.0, 1.0), q(0, 2), f(), q(0, 0), out(2), out(2), out(2), out(0))
    assert native.nest_sorted(*ok) is None and list(ok[5]) == [-1, 0]
    for k, bad in ((1, f(5.0)), (2, q(0, 1)), (2, q(1, 2)), (4, q(0, 1)), (5, out(1)), (8, out(1))):
        with pytest.raises(ValueError):
            native.nest_sorted(*ok[:k], bad, *ok[k + 1:])
    with pytest.raises((TypeError, ValueError, BufferError)):  # outputs must be writable
        native.nest_sorted(*ok[:5], bytes(16), *ok[6:])
