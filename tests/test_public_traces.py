"""Public traces the project never used before (issue 45, "Done when": attention calls, stages and
memory shares exact on unseen files). Two files from facebookresearch/HolisticTraceAnalysis's test
data (tests/fixtures/public/README.md names repository, path, commit, licence), each counted here by
walkers of this file's own over the raw events, which the engine must agree with:

- a recommendation model's training step whose non-log softmax kernels (forward and backward) sit
  among GEMMs, with a batched GEMV (grid z = 8) right before a softmax backward: no attention, with its
  ops and with its CPU side stripped (a kernels-only trace);
- a training step with 4 memsets flushed from before the window: listed apart, in no call.

The walkers are checked on the shared OWLv2 trace too (180 calls there), so a walker that finds
nothing anywhere cannot pass for agreement.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace
from tests.test_kernels_only import strip

PUBLIC = Path(__file__).parent / "fixtures" / "public"
DLRM = PUBLIC / "hta_trace_filter_sampled_rank-0.json.gz"
FLUSHED = PUBLIC / "hta_negative_queue_length_rank0.json.gz"
MATMULS = ("aten::bmm", "aten::baddbmm", "aten::matmul")


def _events(path):
    return json.load(gzip.open(path))["traceEvents"]


def _out_shape(op):
    """A matmul op's output shape from its Input Dims ([.., M, K] x [.., K, N] -> [.., M, N]), or None."""
    dims = (op.get("args") or {}).get("Input Dims") or []
    a, b = (dims[1], dims[2]) if op["name"] == "aten::baddbmm" and len(dims) >= 3 else (dims + [None, None])[:2]
    if not a or not b or len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    return list(a[:-1]) + [b[-1]]


def walk_ops(events):
    """Score paths by shapes: each aten::_softmax whose input [.., Lq, Lk] (rank >= 3) is the output of
    a matmul op just before it on its thread, and is the first operand of a matmul op just after it."""
    by = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            by.setdefault(e["tid"], []).append(e)
    n = 0
    for ops in by.values():
        ops.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        for i, e in enumerate(ops):
            if e["name"] != "aten::_softmax":
                continue
            x = ((e.get("args") or {}).get("Input Dims") or [None])[0]
            if not x or len(x) < 3:
                continue
            before = [o for o in ops[max(0, i - 40):i] if o["name"] in MATMULS]
            after = [o for o in ops[i + 1:i + 40] if o["name"] in MATMULS]
            if before and after and _out_shape(before[-1]) == list(x) and \
                    ((after[0].get("args") or {}).get("Input Dims") or [None])[0] == list(x):
                n += 1
    return n


def _gemm(e):
    return "gemm" in e["name"].lower() or "gemv" in e["name"].lower() or e["name"].startswith("Cijk_")


def walk_kernels(events):
    """Forward score paths on the kernel streams: each non-log softmax forward kernel (cunn_SoftMaxForward,
    softmax_warp_forward<.., false, false>) whose nearest GEMM kernel among the 32 before it and among the
    32 after it (no other softmax between) is batched: grid z > 1."""
    by = {}
    for e in events:
        if e.get("cat") == "kernel":
            by.setdefault((e["pid"], e["tid"]), []).append(e)
    soft = lambda e: "cunn_SoftMax" in e["name"] or "softmax_warp" in e["name"]
    n = 0
    for ks in by.values():
        ks.sort(key=lambda e: e["ts"])
        for i, e in enumerate(ks):
            name = e["name"]
            if not ("cunn_SoftMaxForward" in name or ("softmax_warp_forward" in name and ", false, false>" in name)):
                continue
            found = []
            for rng in (range(i - 1, max(-1, i - 33), -1), range(i + 1, min(len(ks), i + 33))):
                hit = False
                for j in rng:
                    if soft(ks[j]):
                        break
                    if _gemm(ks[j]):  # the nearest GEMM on each side: QKᵀ before, AV after
                        hit = ((ks[j].get("args") or {}).get("grid") or [1, 1, 1])[2] > 1
                        break
                found.append(hit)
            n += all(found)
    return n


def test_walkers_find_the_shared_owlv2_calls():
    events = _events(shared_trace("tl_h100_owlv2_eager_bmm_softmax"))
    assert walk_ops(events) == 180 and walk_kernels(events) == 180


def test_recommendation_training_with_softmax_between_gemms_has_no_attention(tmp_path):
    events = _events(DLRM)
    names = [e["name"] for e in events if e.get("cat") == "kernel"]
    assert sum("softmax_warp_forward<float, float, float, 1, false, false>" in n for n in names) == 2
    assert sum("softmax_warp_backward<float, float, float, 1, false, false>" in n for n in names) == 2
    assert walk_ops(events) == 0 and walk_kernels(events) == 0
    r = analyze_file(str(DLRM))
    assert r["calls"] == 0 and r["stages"] == [] and r["attention_gpu_us"] == 0
    assert not any("softmax kernel" in w for w in r["warnings"])
    bare = tmp_path / "dlrm_kernels_only.json.gz"
    kept = strip(DLRM, bare)
    assert walk_kernels(kept) == 0
    rb = analyze_file(str(bare))
    assert rb["calls"] == 0 and not any("found from kernels only" in w for w in rb["warnings"])


def test_memsets_flushed_from_before_the_window_are_listed_apart():
    events = _events(FLUSHED)
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    start = min(e["ts"] for e in runtime)
    early = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["ts"] < start]
    # the evidence that they are from before the window: no launch of the window is theirs, and their
    # correlation is older than every launch the window recorded
    window_corr = [e["args"]["correlation"] for e in runtime if "correlation" in (e.get("args") or {})]
    assert all(e["args"]["correlation"] < min(window_corr) for e in early)
    r = analyze_file(str(FLUSHED))
    b = r["before_window"]
    assert b["gpu_activities"] == len(early) == 4
    assert b["gpu_us"] == pytest.approx(sum(e["dur"] for e in early))
    assert b["window_start_ts_us"] == pytest.approx(start) and b["first_ts_us"] == pytest.approx(min(e["ts"] for e in early))
    assert walk_ops(events) == 0 and walk_kernels(events) == 0 and r["calls"] == 0
    assert any("before the profiling window" in w for w in r["warnings"])
