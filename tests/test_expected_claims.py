"""Expected against actual, claims re-derived from the events (issue 46, items 7 and 8): the expected side is the
table's only (a fused call's helper kernels are extras with their own causes), and calls whose GPU forward the
trace lacks (a cut window) are left out of every per-call figure and counted apart."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace
from tests.kernel_traces import MLP, TraceBuilder
from tests.test_kernel_calls import KV_WRITE, PAGED, REDUCE

SDPA = "aten::scaled_dot_product_attention"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def test_a_fused_calls_helpers_are_extras_not_expected_steps(tmp_path):
    b = TraceBuilder()
    b.graph_replay([[(KV_WRITE, 3.0), (PAGED, 40.0), (REDUCE, 4.0)] for _ in range(4)], between=MLP)
    path = b.write(tmp_path / "paged.json")
    r = analyze_file(str(path))
    (row,) = r["reading"]
    e = row["expected"]
    # the walker's own count: each invocation launched one attention kernel, one cache write and one reduce
    doc = json.loads(Path(path).read_text())
    names = [ev["name"] for ev in doc["traceEvents"] if ev.get("cat") == "kernel"]
    per_call = {n: names.count(n) / 4 for n in (PAGED, KV_WRITE, REDUCE)}
    assert per_call == {PAGED: 1, KV_WRITE: 1, REDUCE: 1}
    assert e["expected"] == 1 and e["expected_steps"] == ["fused"]  # the table's row, not what ran
    assert e["ran"] == 3
    extras = {x["cause"]: x for x in e["extras"]}
    assert set(extras) == {"kv_cache_write", "split_kv_reduce"}
    assert extras["kv_cache_write"]["per_call"] == per_call[KV_WRITE] and "KV-cache write" in extras["kv_cache_write"]["what"]
    assert extras["split_kv_reduce"]["per_call"] == per_call[REDUCE] and "use a fused backend" not in extras["split_kv_reduce"]["fix"]


def _cut_window(src: Path, dst: Path, keep_calls: int) -> tuple[int, list[float]]:
    """A copy of ``src`` whose GPU records stop at its (keep_calls+1)-th SDPA call, as a profiler window cut
    short leaves them; returns (the SDPA calls, the GPU µs under each kept call's SDPA op in the full trace)."""
    with gzip.open(src) as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    sdpa = sorted((e for e in evs if e.get("name") == SDPA and e.get("ph") == "X"), key=lambda e: e["ts"])
    launches = {e["args"]["correlation"]: e for e in evs
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {})}
    kernels = [e for e in evs if e.get("cat") in GPU_CATS and "correlation" in (e.get("args") or {})]

    def gpu_us(op):
        return sum(k["dur"] for k in kernels if (ln := launches.get(k["args"]["correlation"])) is not None
                   and ln["tid"] == op["tid"] and op["ts"] <= ln["ts"] <= op["ts"] + op["dur"])
    kept = [gpu_us(op) for op in sdpa[:keep_calls]]
    cut = sdpa[keep_calls]["ts"]
    doc["traceEvents"] = [e for e in evs if not (e in kernels and launches.get(e["args"]["correlation"], {}).get("ts", 0) >= cut)]
    with gzip.open(dst, "wt") as f:
        json.dump(doc, f)
    return len(sdpa), kept


def test_a_cut_gpu_window_reads_per_recorded_call(tmp_path):
    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    n, kept = _cut_window(src, tmp_path / "cut.json.gz", 2)
    assert n == 4 and len(kept) == 2 and all(us > 0 for us in kept)
    r = analyze_file(str(tmp_path / "cut.json.gz"))
    (row,) = [g for g in r["reading"] if g["layer_type"] == "BertAttention"]
    e, h = row["expected"], row["host"]
    assert row["calls"] == 4 and e["calls_without_forward"] == 2
    assert e["ran"] == e["ran_min"] >= 1  # the two recorded calls; no zero from the unrecorded ones
    assert h["gpu_us_per_call"] == pytest.approx(sum(kept) / len(kept), abs=1e-3)
    assert "2 call(s) with no GPU forward" in e["summary"] and "2 call(s) with no GPU forward" in h["summary"]


def test_a_group_with_no_recorded_forward_says_unknown_not_zero(tmp_path):
    src = shared_trace("tl_h100_bert_small_sdpa_flash")
    _cut_window(src, tmp_path / "cut0.json.gz", 0)
    r = analyze_file(str(tmp_path / "cut0.json.gz"))
    (row,) = [g for g in r["reading"] if g["layer_type"] == "BertAttention"]
    assert row["expected"]["calls_without_forward"] == 4 and "ran unknown" in row["expected"]["summary"]
    assert row["host"]["gpu_us_per_call"] is None and row["host"]["host_bound"] is None


def test_a_kv_cache_write_launched_by_the_attention_op_is_not_a_repeated_fused_step(tmp_path):
    """vLLM's attention op launches the cache write and the attention kernel itself (one op, two kernels)."""
    b = TraceBuilder()
    b.eager_calls([[(KV_WRITE, 3.0), (PAGED, 40.0)] for _ in range(3)], op_name="vllm::unified_attention_with_output")
    path = b.write(tmp_path / "kv_write.json")
    doc = json.loads(Path(path).read_text())
    assert sum(ev.get("name") == KV_WRITE for ev in doc["traceEvents"]) == 3  # one write per call
    (row,) = analyze_file(str(path))["reading"]
    extras = {x["cause"]: x for x in row["expected"]["extras"]}
    assert "repeated_step" not in extras and extras["kv_cache_write"]["per_call"] == 1
    assert "use a fused backend" not in extras["kv_cache_write"]["fix"]


ALL_SHARED = ("tl_h100_bert_small_sdpa_flash", "tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_bert_small_sdpa_aotriton",
              "tl_mi300x_torch_compile_small", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
              "hta_a100_negative_log_softmax_fwdbwd")


@pytest.mark.parametrize("name", ALL_SHARED)
def test_every_extras_evidence_is_a_kernel_of_its_names(name):
    """The claims audit for extras: each correlation id an extra gives is a kernel of the raw trace, and (where
    the extra lists all its names) one of them; calls counted apart plus calls read make the group's calls."""
    src = shared_trace(name)
    with gzip.open(src) as f:
        kernels = {}
        for e in json.load(f)["traceEvents"]:
            a = e.get("args") or {}
            if e.get("cat") in GPU_CATS and "correlation" in a:
                kernels.setdefault(a["correlation"], set()).add(e["name"])
    r = analyze_file(str(src))
    for row in r["reading"]:
        e = row["expected"]
        if e is None:
            continue
        assert 0 <= e["calls_without_forward"] <= row["calls"]
        for x in e["extras"]:
            for c in x["evidence"]["kernel_correlations"]:
                assert c in kernels, (x["cause"], c)
                if len(x["names"]) < 5:
                    assert kernels[c] & set(x["names"]), (x["cause"], c, kernels[c])
