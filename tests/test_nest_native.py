"""The C op tree (tb_attn_plugin/trace/_nest.c) is link._nest_python at C speed: for any times,
ties and launches, the same order, parents, subtree ends, depths, self times and launch ops."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import link
from tb_attn_plugin.trace.events import Event
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
    slow = analyze_file(path)
    fast.pop("analysis_seconds")
    slow.pop("analysis_seconds")
    assert fast == slow

