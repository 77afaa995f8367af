"""The Reading of one call (reading/call.py, GET /call's ``reading``): the report's own pieces for
the call's layer type × implementation, and every piece it cannot give said with its reason."""

from __future__ import annotations

import copy
import gzip
import json

import pytest

from tb_attn_plugin.reading import call as call_reading
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.reading.section import NO_SHAPES, NOT_SDPA
from tb_attn_plugin.report.text import render
from tests.conftest import recorded_trace, shared_trace


@pytest.fixture(scope="module")
def sdpa() -> dict:
    return analyze_file(str(recorded_trace("sdpa")))


@pytest.fixture(scope="module")
def eager() -> dict:
    return analyze_file(str(recorded_trace("eager")))


def _group(r: dict, layer, implementation: str) -> dict:
    return next(g for g in r["reading"] if (g["layer_type"], g["implementation"]) == (layer.layer_type, implementation))


def test_every_sampled_call_gets_its_own_layers_reading(sdpa):
    for sample in sdpa["call_samples"]:
        p = call_reading.panel(sdpa, sample)
        layer = next(lay for lay in sdpa["layers"] if lay.layer == sample["layer"])
        group = _group(sdpa, layer, sample["implementation"])
        assert p["call"] == sample["id"] and p["layer"] == sample["layer"] and p["calls"] == group["calls"]
        assert p["expected"] is group["expected"] and p["host"] is group["host"]  # looked up, not recomputed
        assert p["why_not_flash"] is layer.why_not_flash


def test_a_cpu_trace_says_why_kernels_and_gpu_time_are_unknown(sdpa):
    p = call_reading.panel(sdpa, sdpa["call_samples"][0])
    assert p["kernels"] == [] and p["unknown"]["kernels"].startswith("no GPU kernels: the trace recorded the CPU only")
    assert p["host"]["gpu_us_per_call"] is None and "no GPU activity" in p["unknown"]["gpu"]
    assert "expected" not in p["unknown"] and "host" not in p["unknown"]


def test_an_eager_call_says_why_not_flash_was_not_read(eager):
    p = call_reading.panel(eager, eager["call_samples"][0])
    assert p["why_not_flash"] is None
    layer = next(lay for lay in eager["layers"] if lay.layer == p["layer"])
    assert p["unknown"]["why_not_flash"] == layer.why_not_flash_unknown == NOT_SDPA


def test_an_sdpa_op_without_shapes_says_record_shapes(tmp_path):
    # A recorded trace with its SDPA op's inputs removed, as a trace profiled without record_shapes has it.
    doc = json.loads(gzip.decompress(recorded_trace("small").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::scaled_dot_product_attention":
            for k in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                e.get("args", {}).pop(k, None)
    path = tmp_path / "no_shapes.json"
    path.write_text(json.dumps(doc))
    r = analyze_file(str(path))
    p = call_reading.panel(r, r["call_samples"][0])
    assert p["why_not_flash"] is None and p["unknown"]["why_not_flash"] == NO_SHAPES


def test_a_layer_the_report_does_not_keep_is_unknown_with_the_reason(sdpa):
    sample = dict(sdpa["call_samples"][0], layer="not.a.layer")
    p = call_reading.panel(sdpa, sample)
    assert p["expected"] is None and p["host"] is None and p["why_not_flash"] is None
    assert "not among the report's layers" in p["unknown"]["layer"]


def test_a_damaged_report_gives_unknowns_not_an_exception(sdpa):
    sample = sdpa["call_samples"][0]
    for bad in ({}, {"layers": 5, "reading": "x", "kernel_reading": []}, {"layers": [1, None], "reading": [None]},
                {"layers": sdpa["layers"], "reading": [{"layer_type": 1}], "kernel_reading": {"fingerprints": []}}):
        p = call_reading.panel(bad, sample)
        assert p["expected"] is None and p["unknown"]
    odd = dict(sample, events=[None, {"kind": "kernel"}, {"kind": "kernel", "name": "k", "dur_us": "x"}, 7])
    p = call_reading.panel(sdpa, odd)
    assert [(k["name"], k["launches"], k["us"]) for k in p["kernels"]] == [("k", 1, 0.0)]
    assert p["kernels"][0]["fingerprint"] is None and p["kernels"][0]["fingerprint_unknown"]


def test_the_gpu_calls_kernels_carry_fingerprints_and_occupancy():
    r = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    sample = r["call_samples"][0]
    p = call_reading.panel(r, sample)
    names = list(dict.fromkeys(e["name"] for e in sample["events"] if e["kind"] == "kernel"))
    assert [k["name"] for k in p["kernels"]] == names[:call_reading.MAX_KERNELS]
    assert all(k["fingerprint"] is r["kernel_reading"]["fingerprints"][k["name"]] for k in p["kernels"])
    gap = [k for k in p["kernels"] if k["occupancy"] and k["occupancy"].zero_estimate_cause
           == "shared memory over the default limit"]
    assert gap and all(k["occupancy"].theoretical_pct > 0 for k in gap)  # the theoretical figure beside the 0%
    memset = next(k for k in p["kernels"] if k["name"].startswith("Memset"))
    assert memset["occupancy"] is None and memset["occupancy_unknown"] == call_reading.NO_OCCUPANCY
    assert p["host"]["host_bound"] is False and p["unknown"].keys() == {"backward", "why_not_flash"}


def test_the_text_report_carries_the_panels_pieces(sdpa, eager):
    text = render(sdpa)
    g = sdpa["reading"][0]
    assert g["expected"]["summary"] in text
    assert "attention op self (inside aten::scaled_dot_product_attention)" in text and "dispatch" in text
    assert "no GPU kernels: a CPU trace, so no fingerprints or occupancy" in text
    assert f"backward: {call_reading.BACKWARD}" in text
    # why not flash by the CPU's rules: this call ran aten::_scaled_dot_product_flash_attention_for_cpu
    assert "ran cpu_fused): flash_cpu eligible" in text and "sm80" not in text
    assert f"why not flash: {NOT_SDPA}" in render(eager)
    no_host = copy.deepcopy(sdpa)
    no_host["reading"][0]["host"] = None
    assert f"host: unknown: {call_reading.NO_HOST}" in render(no_host)
