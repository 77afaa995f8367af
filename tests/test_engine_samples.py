"""Call samples for the one-call timeline: every layer and every step can be picked, and each event
says where it ran (an op's thread, a kernel's stream)."""

from __future__ import annotations

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.samples import MAX_SAMPLES
from tests.conftest import shared_trace


@pytest.mark.parametrize("mode", ["eager", "sdpa", "math"])
def test_samples_cover_every_layer_and_every_step(cpu_traces, mode):
    r = analyze_file(str(cpu_traces[mode]))
    samples = r["call_samples"]
    steps = {s["step"] for s in samples}
    assert len(steps) == len(r["steps"]) == 2  # tests/cpu_models.py records two active steps
    assert {(s["layer"], s["step"]) for s in samples} == {(lay.layer, st) for lay in r["layers"] for st in steps}
    assert len({s["id"] for s in samples}) == len(samples) == min(r["calls"], MAX_SAMPLES)
    for s in samples:
        for e in s["events"]:
            assert e["kind"] == "op" and e["thread"].strip()


def test_kernels_say_their_stream():
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    kernels = [e for s in r["call_samples"] for e in s["events"] if e["kind"] == "kernel"]
    assert kernels and all(e["stream"] == "7" for e in kernels)  # the trace's one compute stream
