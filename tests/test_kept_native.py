"""The C keeper (tb_attn_plugin/trace/_kept.c) changes speed only: the events _Kept keeps, the
objects they share, the shapes they hold and every report are the same with and without it."""

from __future__ import annotations

import math
import os

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import events
from tests.conftest import shared_trace

needs_keeper = pytest.mark.skipif(events._c_kept is None and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                                  reason="the C keeper is not built (no compiler at install time)")


def test_the_keeper_is_built_where_required():
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert events._c_kept is not None, "tb_attn_plugin/trace/_kept.c was not compiled (pip install -e . needs gcc)"


def _strip(r):
    r = dict(r)
    r.pop("analysis_seconds", None)
    return r


@needs_keeper
@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_h100_bert_small_sdpa_flash",
                                  "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph", "hta_a100_negative_log_softmax_fwdbwd"])
def test_real_traces_give_the_same_report(monkeypatch, name):
    path = str(shared_trace(name))
    fast = _strip(analyze_file(path))
    monkeypatch.setattr(events, "_c_kept", None)
    assert _strip(analyze_file(path)) == fast


_times = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10 ** 20), 10 ** 20) | st.sampled_from(
    [0.0, -0.0, events.MAX_TS, -events.MAX_TS, events.MAX_DUR, math.nextafter(events.MAX_DUR, 0), 1e17, -1e17])
_ids = st.integers(-3, 3) | st.integers(10 ** 5, 10 ** 5 + 3) | st.sampled_from(["1", "a", "gpu 0"])


@needs_keeper
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_times, _times, st.sampled_from(["X", "i", "s"]), st.sampled_from(["kernel", "cpu_op", "x"]),
                          st.sampled_from(["a", "b", "[memory]"]), _ids, _ids), max_size=30))
def test_keep_sane_is_the_python_rule(rows):
    """Same events kept (ints and floats, NaN, infinities, the bounds themselves), same count left
    out, and every kept field replaced by the same shared object."""
    def make():
        # Fresh string objects each time, as decoding makes them.
        return [events.Event(ph="".join(ph), cat="".join(cat), name="".join(nm), pid=pid, tid=tid, ts=ts, dur=dur)
                for ts, dur, ph, cat, nm, pid, tid in rows]

    got = {}
    for mode in ("c", "py"):
        k = events._Kept(None)
        evs = make()
        if mode == "py":
            saved, events._c_kept = events._c_kept, None
        try:
            ok = k._sane(evs)
        finally:
            if mode == "py":
                events._c_kept = saved
        shared = {id(v) for v in k._shared.values()}
        for e in ok:
            for f in ("ph", "cat", "name", "pid", "tid"):
                assert id(getattr(e, f)) in shared
        got[mode] = ([evs.index(e) for e in ok], k.insane, k._shared)
    assert got["c"] == got["py"]


@needs_keeper
def test_detach_shapes_is_the_python_rule(monkeypatch):
    text = (b'[{"ph":"X","cat":"cpu_op","name":"aten::bmm","args":{"Input Dims":[[2,3]],"Input type":["float"]}},'
            b'{"ph":"X","cat":"cpu_op","name":"aten::add","args":{"Input Dims":[[2]],"Concrete Inputs":["1"]}},'
            b'{"ph":"X","cat":"cpu_op","name":"aten::bmm","args":{"Concrete Inputs":["", "2"]}},'
            b'{"ph":"X","cat":"cpu_op","name":"aten::add"},{"ph":"X","cat":"cpu_op","name":"aten::bmm","args":{}}]')
    asked = []

    def keep(name):
        asked.append(name)
        return name == "aten::bmm"

    out = {}
    for mode in ("c", "py"):
        if mode == "py":
            monkeypatch.setattr(events, "_c_kept", None)
        ops, keeps = events._list_decoder.decode(text), {}
        asked.clear()
        events._detach_shapes(ops, keep, keeps)
        for e in ops:
            a = events.args_of(e)
            for raw in (a.dims_raw, a.types_raw, a.concrete_raw):
                # Kept shapes are copies (bytes of their own), not views into the decoded text.
                assert raw is events._NULL or isinstance(raw, msgspec.Raw)
        out[mode] = ([(e.name, bytes(events.args_of(e).dims_raw), bytes(events.args_of(e).types_raw),
                       bytes(events.args_of(e).concrete_raw)) for e in ops], keeps, list(asked))
    assert out["c"] == out["py"]
    assert out["c"][0][1][1:] == (b"null", b"null", b"null")  # aten::add's shapes dropped
    assert out["c"][2] == ["aten::bmm", "aten::add"]  # keep() asked once per name
