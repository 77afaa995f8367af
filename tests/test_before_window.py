"""GPU activity launched before the profiling window is listed apart, never counted as calls of the
window (issue 45, "What to build" 2). Kineto can flush kernels launched before the profiler's window
began (warm-up steps, an earlier window): no launch of the trace carries their correlation id, which
CUPTI numbered before every launch of the window. The cases: a shared trace stripped of its ops (the
stripper is this file's) with two attention calls' kernels copied before the window, and a built trace
of real FlashAttention-2 kernel names, launched in the window and flushed before it.
"""

from __future__ import annotations

import gzip
import json

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace
from tests.kernel_traces import TraceBuilder

# The host side a kernel-launch-only trace lacks: ops, annotations, Python frames and the flows tying
# kernels to ops; the runtime calls (cuda_runtime, cuda_driver) stay, so no kernel has a launching op.
OPS = frozenset({"cpu_op", "user_annotation", "gpu_user_annotation", "python_function", "cpu_instant_event",
                 "Trace", "overhead", "fwdbwd"})


def _is_gemm(name):
    return "gemm" in name or name.startswith("Cijk_")


def _attention_spans(kernels):
    """Walker: per stream, each attention softmax kernel (cunn_SoftMaxForward, softmax_warp_forward with
    is_log_softmax false) and the kernels from the
    GEMM before it to the GEMM after it, as lists of kernel events."""
    by = {}
    for e in kernels:
        by.setdefault(e["tid"], []).append(e)
    spans = []
    for ks in by.values():
        ks.sort(key=lambda e: e["ts"])
        for i, e in enumerate(ks):
            n = e["name"]
            if not ("cunn_SoftMaxForward" in n or ("softmax_warp_forward" in n and ", false, false>" in n)):
                continue
            lo = next(j for j in range(i - 1, -1, -1) if _is_gemm(ks[j]["name"]))
            hi = next(j for j in range(i + 1, len(ks)) if _is_gemm(ks[j]["name"]))
            spans.append(ks[lo:hi + 1])
    return spans


def test_owlv2_without_ops_kernels_before_the_window_are_listed_apart(tmp_path):
    src = shared_trace("tl_h100_owlv2_eager_bmm_softmax")
    doc = json.load(gzip.open(src))
    events = [e for e in doc["traceEvents"] if e.get("cat") not in OPS and e.get("ph") not in ("s", "f", "t")]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    start = min(e["ts"] for e in runtime)
    oldest = min(e["args"]["correlation"] for e in runtime if "correlation" in e.get("args", {}))
    kernels = [e for e in events if e.get("cat") == "kernel"]
    spans = _attention_spans([dict(e) for e in kernels])
    window_us = sum(k["dur"] for s in spans for k in s)
    # Two calls' kernels flushed from before the window: copies ending 1 ms before its first runtime
    # call, with correlation ids older than every launch of the window (and so carried by none).
    flushed, t = [], start - 1000.0
    for span in reversed(spans[:2]):
        for k in reversed(span):
            t -= k["dur"] + 1.0
            flushed.append(dict(k, ts=t, args=dict(k.get("args", {}), correlation=oldest - 1 - len(flushed))))
    doc["traceEvents"] = events + flushed
    path = tmp_path / "owl_flushed.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    r = analyze_file(str(path))
    assert r["calls"] == len(spans) == 180
    assert r["attention_gpu_us"] == pytest.approx(window_us, rel=1e-9)
    b = r["before_window"]
    assert b["gpu_activities"] == len(flushed)
    assert b["gpu_us"] == pytest.approx(sum(k["dur"] for k in flushed), abs=1e-3)
    assert b["window_start_ts_us"] == pytest.approx(start, abs=1e-3)
    assert b["first_ts_us"] == pytest.approx(min(k["ts"] for k in flushed), abs=1e-3)
    (line,) = [w for w in r["warnings"] if "launched before the profiling window" in w]
    assert line.startswith(f"{len(flushed)} GPU activities")
    assert not any("softmax kernel" in w for w in r["warnings"])  # the safety net leaves them to before_window


def test_unchanged_shared_trace_has_nothing_before_its_window():
    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    doc = json.load(gzip.open(src))
    start = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver"))
    assert all(e["ts"] >= start for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    r = analyze_file(str(src))
    assert r["before_window"] is None and r["calls"] == 4


# FlashAttention-2's forward kernel (Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h,
# DEFINE_FLASH_FORWARD_KERNEL(flash_fwd_kernel, ...)), launched by its torch.library op flash_attn::_flash_attn_forward
FA2_FWD = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
           "false, false, false, false, false, false, false, false>(flash::Flash_fwd_params)")


def test_fused_kernels_flushed_before_the_window_are_no_calls(tmp_path):
    b = TraceBuilder()
    b.gpu_t = b.t - 500.0  # three forwards of a warm-up step, flushed: no launch in the window, older ids
    for i in range(3):
        b.kernel(FA2_FWD, 500 + i, 40.0, gap=5.0)
    b.gpu_t = b.t + 5.0
    for i in range(2):
        t = b.t
        b.op("flash_attn::_flash_attn_forward", t, 20.0)
        b.kernel(FA2_FWD, b.launch(t + 1), 40.0)
        b.t += 50
    r = analyze_file(str(b.write(tmp_path / "flushed.json")))
    assert r["calls"] == 2
    assert r["attention_gpu_us"] == pytest.approx(80.0)
    assert r["before_window"]["gpu_activities"] == 3 and r["before_window"]["gpu_us"] == pytest.approx(120.0)
    assert any(w.startswith("3 GPU activities (120.0 µs) were launched before the profiling window") for w in r["warnings"])


def test_launches_lost_in_the_window_make_before_window_unknown(tmp_path):
    """Kernels of ids both older and newer than the window's launches lack their launch: launches were
    lost (a reader that skipped them, say), so the older ones cannot be told from lost ones."""
    b = TraceBuilder()
    b.kernel(FA2_FWD, 500, 40.0)
    t = b.t
    b.op("flash_attn::_flash_attn_forward", t, 20.0)
    b.kernel(FA2_FWD, b.launch(t + 1), 40.0)
    b.kernel(FA2_FWD, b.corr + 7, 40.0)  # a newer id whose launch is not in the trace
    r = analyze_file(str(b.write(tmp_path / "lost.json")))
    assert r["before_window"] is None


def test_kernels_only_trace_says_the_window_cannot_be_placed(tmp_path):
    """Stripped of its runtime calls too (the kernels-only stripper of test_kernels_only), a trace has no
    launch to place its window by: kernels flushed from before it cannot be told apart, and it says so."""
    from tests.test_kernels_only import strip

    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    strip(src, tmp_path / "bare.json.gz")
    r = analyze_file(str(tmp_path / "bare.json.gz"))
    assert r["before_window"] is None and r["calls"] == 4
    assert any("no runtime or driver call" in w and "cannot be told apart" in w for w in r["warnings"])
    assert not any("no runtime or driver call" in w for w in analyze_file(str(src))["warnings"])
