"""Never a confident zero (issue 24 item 8, traces): a call whose launches have no kernel because the
profiler stopped before the GPU finished is "not recorded", not 0 µs; the report says the GPU window
was cut and which calls lost kernels.

A cut window cannot be recorded on a CPU (a CPU-only profile has no GPU activity and no launches), so
the cut traces here are real GPU traces with their tail kernels removed, exactly what a profile that
stops before torch.cuda.synchronize() leaves: the launches (cuda_runtime, with correlation ids) are
there, the kernels they queued are not. The built traces use real kernel names (sources below).
"""

from __future__ import annotations

import gzip
import json
import re

import msgspec
import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.text import render
from tests.conftest import shared_trace
from tests.kernel_traces import HOST_PID, HOST_TID, MLP, TraceBuilder

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# pytorch/pytorch aten/src/ATen/native/transformers/cuda/flash_attn (as in tl_h100_bert_small_sdpa_flash)
FLASH = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
         "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, "
         "false, false, false, true, false>(pytorch_flash::Flash_fwd_params)")


def _cut_tail(src, dst, first_cut: str):
    """The trace without its GPU activities from the last one named like ``first_cut`` on (their
    launches kept); returns the removed activities."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    gpu = sorted((e for e in doc["traceEvents"] if e.get("cat") in GPU_CATS), key=lambda e: e["ts"])
    start = max(e["ts"] for e in gpu if first_cut in e["name"])
    removed = [e for e in gpu if e["ts"] >= start]
    gone = {id(e) for e in removed}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in gone]
    dst.write_bytes(json.dumps(doc).encode())
    return doc, removed


def test_bert_cut_before_its_last_attention_kernel(tmp_path):
    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    doc, removed = _cut_tail(src, tmp_path / "bert_cut.json", "flash_fwd_kernel")
    # Counted from the events: each removed kernel's launch is a kernel launch that stays in the trace.
    launches = {e["args"]["correlation"]: e["name"] for e in doc["traceEvents"]
                if e.get("cat") == "cuda_runtime" or e.get("cat") == "cuda_driver"}
    assert all(re.fullmatch(r"cu(da)?LaunchKernel(ExC)?", launches[e["args"]["correlation"]]) for e in removed)
    full = analyze_file(str(src))
    r = analyze_file(str(tmp_path / "bert_cut.json"))
    assert full["gpu_window"] is None
    w = r["gpu_window"]
    assert w["cut"] is True and w["unrecorded_launches"] == len(removed) == w["after_last_recorded"]
    # The fourth BertAttention call kept its projections' kernels but lost its flash kernel.
    assert r["calls"] == full["calls"] == 4
    (row,) = w["calls"]
    assert row["recorded"] == "partly" and w["calls_partly_recorded"] == 1 and w["calls_not_recorded"] == 0
    lay = next(lay for lay in r["layers"] if lay.layer == row["layer"])
    assert lay.gpu_unrecorded_calls == 1
    flash = [k for k in r["kernels"] if "flash_fwd_kernel" in k["name"]]
    assert sum(k["count"] for k in flash) == 3
    assert any(w_.startswith("the GPU window was cut") and row["layer"] in w_ for w_ in r["warnings"])
    text = render(r)
    assert "at least" in text and "GPU window cut" in text and "≥ " in text


def _sdpa_call(b: TraceBuilder, kernels: list[str], recorded: bool) -> None:
    """One aten::_scaled_dot_product_flash_attention call launching ``kernels``; their kernels are
    written only when ``recorded``."""
    start = b.t
    b.op("aten::scaled_dot_product_attention", start, 60.0)
    b.op("aten::_scaled_dot_product_flash_attention", start + 1, 55.0)
    t = start + 2
    for name in kernels:
        corr = b.launch(t)
        if recorded:
            b.kernel(name, corr, 20.0)
        t += 5
    b.t += 80


def test_calls_with_no_kernel_at_all_are_not_recorded_not_zero(tmp_path):
    b = TraceBuilder()
    _sdpa_call(b, [FLASH], True)
    _sdpa_call(b, [FLASH], True)
    _sdpa_call(b, [FLASH], False)  # launched, then the profiler stopped
    r = analyze_file(str(b.write(tmp_path / "cut.json")))
    assert r["calls"] == 3
    w = r["gpu_window"]
    assert w["cut"] and w["unrecorded_launches"] == 1 and w["calls_not_recorded"] == 1
    (row,) = w["calls"]
    assert row["recorded"] == "none" and row["unrecorded_launches"] == 1
    assert [s.get("gpu_recorded") for s in r["call_samples"] if s["id"] == row["id"]] == ["none"]
    text = render(r)
    assert "not recorded" in text
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(msgspec.to_builtins(r), json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text()))


def test_launches_inside_a_stream_capture_are_not_missing_kernels(tmp_path):
    """Kernels launched while a stream is captured run later, by the graph: a capture at the end of
    the window is not a cut (as in tl_mi300x_xdit_flux1_aiter_fmha_hipgraph, whose 994 captured launches
    have no kernel)."""
    b = TraceBuilder()
    _sdpa_call(b, [FLASH], True)
    b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "pid": HOST_PID, "tid": HOST_TID,
                     "ts": b.t, "dur": 2.0, "args": {"correlation": 99990}})
    b.t += 5
    _sdpa_call(b, [FLASH, MLP[0][0]], False)
    b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "pid": HOST_PID, "tid": HOST_TID,
                     "ts": b.t, "dur": 2.0, "args": {"correlation": 99991}})
    r = analyze_file(str(b.write(tmp_path / "capture.json")))
    assert r["gpu_window"] is None


def test_no_real_trace_is_called_cut(shared_traces):
    for f in sorted(shared_traces.glob("*.json.gz")):
        assert analyze_file(str(f))["gpu_window"] is None, f.name


def test_rank_with_a_cut_window_is_named_a_lower_bound(tmp_path):
    """Two ranks of the BERT trace, rank 1's window cut before its last attention kernel: the rank
    summary says rank 1's attention time is a lower bound (before: it just read as the fastest)."""
    from tb_attn_plugin.ranks.summary import summarize_ranks
    from tests.rank_jobs import write_job

    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    full = tmp_path / "full.json"
    full.write_bytes(gzip.decompress(src.read_bytes()))
    _cut_tail(src, tmp_path / "cut.json", "flash_fwd_kernel")
    write_job(tmp_path / "job", {0: full, 1: tmp_path / "cut.json"})
    doc = summarize_ranks([analyze_file(str(f)) for f in sorted((tmp_path / "job").iterdir())])
    by = {r["rank"]: r for r in doc["ranks"]}
    assert by[0]["gpu_unrecorded_launches"] == 0 and by[1]["gpu_unrecorded_launches"] > 0
    assert "rank 1 lost kernels (GPU window cut): its attention time is a lower bound" in doc["headline"]


def test_a_small_share_of_the_peak_never_reads_zero():
    """BERT-small's flash attention on an H100 reaches a few TFLOP/s of 990: 0.4%, never "0%"."""
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    (v,) = [v for v in r["verdicts"] if v["id"] == "tflops"]
    assert " 0% of" not in v["message"]
    lay = max((lay for lay in r["layers"] if lay.tflops), key=lambda x: x.gpu_us)
    assert f"{lay.tflops / r['device']['peak_tflops']:.1%} of" in v["message"]


def test_compare_says_which_side_is_a_lower_bound(tmp_path):
    from tb_attn_plugin.report.compare import compare_reports

    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    _cut_tail(src, tmp_path / "cut.json", "flash_fwd_kernel")
    c = compare_reports([("full", analyze_file(str(src))), ("cut", analyze_file(str(tmp_path / "cut.json")))])
    assert "cut: GPU window cut, 1 call lost kernels (a lower bound)" in c["summary"]
    assert "full: GPU window" not in c["summary"]


def test_kernels_without_correlation_ids_are_not_called_missing(tmp_path):
    """A writer that drops the kernels' correlation ids (kernels joined by External id only) leaves
    every launch without a matching kernel: that says nothing about the window, so no cut is claimed."""
    b = TraceBuilder()
    for _ in range(2):
        _sdpa_call(b, [FLASH], True)
    for e in b.events:
        if e["cat"] == "kernel":
            del e["args"]["correlation"]
    r = analyze_file(str(b.write(tmp_path / "no_corr.json")))
    assert r["gpu_window"] is None
