"""compare_reports: the data behind /compare (and the CLI), on small hand-made reports."""

from __future__ import annotations

import pytest

from tb_attn_plugin.format.report.layers import Layer
from tb_attn_plugin.report.compare import MAX_ONLY_IN, compare_reports


def layer(name: str, layer_type: str, implementation: str, gpu_us: float, cpu_us: float) -> Layer:
    """A layer row with what compare reads; the rest as unknown."""
    return Layer(layer=name, layer_type=layer_type, calls=1, backend="?", compiled=False, source="op", shape=None,
                 dtype=None, causal=None, dropout=None, mask=None, flops=None, score_bytes=None, memory_bytes=None,
                 first_call=0, kernels=[], implementation=implementation, gpu_us=gpu_us, cpu_us=cpu_us, stages=[],
                 tflops=None, occupancy=[], why_not_flash=None, why_not_flash_unknown=None)


def report(stages, layers=(), kernels=(), basis="gpu", impl="flash", att=None):
    key = f"{basis}_us"
    total = sum(v for _, _, v in stages)
    return {
        "time_basis": basis, "total_gpu_us": 1000.0 if basis == "gpu" else 0.0, "total_cpu_us": 5000.0,
        "attention_gpu_us": total if basis == "gpu" else 0.0, "attention_cpu_us": att or total * 2,
        "attention_share": 0.5, "calls": 2,
        "stages": [{"stage": s, "pass": p, key: v, "gpu_us" if basis == "cpu" else "cpu_us": v * 2}
                   for s, p, v in stages],
        "layers": [layer(f"{t}_0", t, i, **{key: v, "gpu_us" if basis == "cpu" else "cpu_us": v * 2})
                   for t, i, v in layers],
        "kernels": [{"name": n, "stage": s, "pass": "fwd", "count": 1, "gpu_us": v} for n, s, v in kernels],
        "implementations": [{"layer_type": "Attn", "implementation": impl, "calls": 2}],
    }


EAGER = report([("qk_matmul", "fwd", 100.0), ("softmax", "fwd", 300.0), ("av_matmul", "fwd", 100.0)],
               layers=[("Attn", "eager", 500.0)], impl="eager",
               kernels=[("gemm_a", "qk_matmul", 100.0), ("softmax_k", "softmax", 300.0), ("gemm_b", "av_matmul", 100.0)])
FLASH = report([("fused", "fwd", 120.0), ("softmax", "fwd", 0.0)], layers=[("Attn", "flash", 120.0)],
               kernels=[("flash_fwd", "fused", 120.0)])


def test_deltas_are_last_minus_first_and_sorted_by_size():
    c = compare_reports([("eager", EAGER), ("flash", FLASH)])
    assert c["runs"] == ["eager", "flash"] and c["time_basis"] == "gpu"
    assert [(s["stage"], s["delta_us"]) for s in c["stages"]] == [
        ("softmax", -300.0), ("fused", 120.0), ("qk_matmul", -100.0), ("av_matmul", -100.0)]
    softmax = c["stages"][0]
    assert softmax["values"] == [300.0, 0.0] and softmax["delta_pct"] == -100.0
    assert c["stages"][1]["delta_pct"] is None  # no percentage of zero
    assert c["layers"] == [{"layer_type": "Attn", "values": [500.0, 120.0], "implementations": ["eager", "flash"],
                            "delta_us": -380.0, "delta_pct": -76.0, "layers": [["Attn_0"], ["Attn_0"]]}]
    assert [k["name"] for k in c["kernels_only_in"]["eager"]] == ["softmax_k", "gemm_a", "gemm_b"]
    assert [k["name"] for k in c["kernels_only_in"]["flash"]] == ["flash_fwd"]
    assert c["summary"].startswith("flash vs eager: cannot tell whether this is noise: attention 500.0 µs -> 120.0 µs "
                                   "GPU time (-76.0%); eager has no profiler steps with attention and flash has no profiler steps")
    assert c["summary"].endswith("; implementation eager -> flash; largest stage change: softmax fwd -300.0 µs")


def test_cpu_basis_when_any_run_lacks_gpu_kernels():
    cpu = report([("fused", "fwd", 50.0), ("fused", "bwd", 70.0)], basis="cpu", impl="flash")
    c = compare_reports([("gpu", FLASH), ("cpu", cpu)])
    assert c["time_basis"] == "cpu" and "CPU" in c["time_basis_note"]
    fused_fwd = next(s for s in c["stages"] if (s["stage"], s["pass"]) == ("fused", "fwd"))
    assert fused_fwd["values"] == [240.0, 50.0]  # FLASH's cpu_us is twice its gpu_us
    assert [t["time_basis"] for t in c["totals"]] == ["gpu", "cpu"]


def test_three_runs_and_layers_missing_in_one():
    other = report([("fused", "fwd", 10.0)], layers=[("Cross", "flash", 10.0)], kernels=[("flash_fwd", "fused", 10.0)])
    c = compare_reports([("a", EAGER), ("b", FLASH), ("c", other)])
    assert all(len(s["values"]) == 3 for s in c["stages"])
    cross = next(layer for layer in c["layers"] if layer["layer_type"] == "Cross")
    assert cross["values"] == [0.0, 0.0, 10.0] and cross["implementations"] == [None, None, "flash"]
    assert c["kernels_only_in"]["b"] == [] and c["kernels_only_in"]["c"] == []  # flash_fwd is in both


def test_kernels_only_in_is_capped_but_counted():
    many = report([("other", "fwd", 1.0)], kernels=[(f"k{i}", "other", float(i)) for i in range(MAX_ONLY_IN + 20)])
    c = compare_reports([("many", many), ("flash", FLASH)])
    assert len(c["kernels_only_in"]["many"]) == MAX_ONLY_IN and c["kernels_only_in_counts"]["many"] == MAX_ONLY_IN + 20
    assert c["kernels_only_in"]["many"][0]["name"] == f"k{MAX_ONLY_IN + 19}"


def test_needs_two_runs_and_tolerates_sparse_reports():
    with pytest.raises(ValueError):
        compare_reports([("only", FLASH)])
    c = compare_reports([("a", {}), ("b", {"stages": None, "layers": [layer("x", "X", "?", 0.0, 0.0)]})])
    assert c["time_basis"] == "cpu" and c["stages"] == [] and c["layers"][0]["values"] == [0.0, 0.0]


# Two cuBLAS-shipped CUTLASS GEMMs of the H100 BERT trace (shared/traces, tl_h100_bert_small_sdpa_flash) and
# the cuDNN SDPA kernel the HF post names: real names, so the fingerprint rules decode them as they would a trace.
GEMM_64 = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"
           "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)")
GEMM_256 = ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>"
            "(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)")
CUDNN = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0"


def test_kernels_are_matched_across_runs_by_fingerprint():
    a = report([("qkv_proj", "fwd", 50.0)], kernels=[(GEMM_64, "qkv_proj", 50.0), (CUDNN, "fused", 10.0)])
    b = report([("qkv_proj", "fwd", 40.0)], kernels=[(GEMM_256, "qkv_proj", 40.0), ("flash_fwd", "fused", 9.0)])
    c = compare_reports([("a", a), ("b", b)])
    (row,) = c["kernel_changes"]  # cuDNN vs an undecodable name: different work, not a change
    assert row["kernels"] == [GEMM_64, GEMM_256] and row["stage"] == "qkv_proj"
    assert row["changed"] == {"tile": ["64x64", "256x128"]}
    assert "tile 64x64 -> 256x128" in row["message"]
    assert compare_reports([("a", a), ("a2", a)])["kernel_changes"] == []
