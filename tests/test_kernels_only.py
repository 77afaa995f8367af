"""Attention calls from kernels alone (issue 45): traces recorded with activities=[CUDA] only carry no
CPU op, no runtime call and no flow, yet eager attention is plain on each stream: batched GEMM ->
(scale, mask) -> softmax -> batched GEMM, and the mirror in backward. Every shared trace is stripped
of its CPU side here (the stripper is this file's, not the engine's) and must give the original's
calls; FlashAttention-2 decode replayed from a CUDA graph is one call per layer, its split-KV combine
kernel joining its attention kernel; softmax kernels between batched GEMMs that no call claims warn.
"""

from __future__ import annotations

import gzip
import json

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace
from tests.kernel_traces import MLP, TraceBuilder

# Everything a trace recorded with activities=[ProfilerActivity.CUDA] lacks: host ops and annotations,
# runtime/driver calls, Python frames, instants, and the flows (ac2g, fwdbwd) that tie kernels to them.
CPU_SIDE = frozenset({"cpu_op", "user_annotation", "gpu_user_annotation", "cuda_runtime", "cuda_driver",
                      "python_function", "cpu_instant_event", "Trace", "overhead", "ac2g", "fwdbwd", "Runtime"})
TRACES = ("tl_h100_owlv2_eager_bmm_softmax", "tl_h100_bert_small_sdpa_flash", "tl_mi300x_bert_small_sdpa_aotriton",
          "tl_mi300x_torch_compile_small", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
          "hta_a100_negative_log_softmax_fwdbwd")


def strip(src, dst):
    doc = json.load(gzip.open(src))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kept = [e for e in events if e.get("cat") not in CPU_SIDE and e.get("ph") not in ("s", "f", "t")]
    assert not any(e.get("cat") in ("cpu_op", "cuda_runtime") for e in kept)
    doc["traceEvents"] = kept
    with gzip.open(dst, "wt") as f:
        json.dump(doc, f)
    return kept


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    return tmp_path_factory.mktemp("kernels_only")


@pytest.mark.parametrize("name", TRACES)
def test_kernels_only_trace_gives_the_originals_calls(name, stripped):
    src = shared_trace(name)
    strip(src, stripped / f"{name}.json.gz")
    full, bare = analyze_file(str(src)), analyze_file(str(stripped / f"{name}.json.gz"))
    assert bare["calls"] == full["calls"]
    eager = [i for i in bare["implementations"] if i["implementation"] == "eager"]
    if eager:
        assert any("found from kernels only" in w for w in bare["warnings"])


def _walk_eager(kernels):
    """Walker: per stream, each attention softmax kernel (cunn_SoftMaxForward / softmax_warp_forward
    with is_log_softmax false) and the kernels from the GEMM before it to the GEMM after it: (calls, µs)."""
    by = {}
    for e in kernels:
        by.setdefault(e["tid"], []).append(e)
    calls, us = 0, 0.0
    for ks in by.values():
        ks.sort(key=lambda e: e["ts"])
        for i, e in enumerate(ks):
            n = e["name"]
            if not ("cunn_SoftMaxForward" in n or ("softmax_warp_forward" in n and ", false, false>" in n)):
                continue
            lo = next(j for j in range(i - 1, -1, -1) if "gemm" in ks[j]["name"] or ks[j]["name"].startswith("Cijk_"))
            hi = next(j for j in range(i + 1, len(ks)) if "gemm" in ks[j]["name"] or ks[j]["name"].startswith("Cijk_"))
            calls += 1
            us += sum(k["dur"] for k in ks[lo:hi + 1])
    return calls, us


def test_owlv2_kernels_only(stripped):
    src = shared_trace("tl_h100_owlv2_eager_bmm_softmax")
    kept = strip(src, stripped / "owl.json.gz")
    r = analyze_file(str(stripped / "owl.json.gz"))
    calls, us = _walk_eager([e for e in kept if e.get("cat") == "kernel"])
    assert 170 <= r["calls"] <= 190 and r["calls"] == calls == 180
    assert 450_000 <= r["attention_gpu_us"] <= 530_000
    assert r["attention_gpu_us"] == pytest.approx(us, rel=1e-9)
    fwd = {s["stage"] for s in r["stages"] if s["pass"] == "fwd"}
    assert {"qk_matmul", "softmax", "av_matmul"} <= fwd
    assert {i["implementation"] for i in r["implementations"]} == {"eager"}


def test_negative_control_kernels_only(stripped):
    src = shared_trace("hta_a100_negative_log_softmax_fwdbwd")
    strip(src, stripped / "neg.json.gz")
    r = analyze_file(str(stripped / "neg.json.gz"))
    assert r["calls"] == 0 and not any("softmax kernel" in w for w in r["warnings"])


# --- built from real kernel names -----------------------------------------------------------------
# OWLv2's QKᵀ and AV GEMMs and softmax (trace: tl_h100_owlv2_eager_bmm_softmax, with their grids)
QK = ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1::Params)", [328, 3, 16])
AV = ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1::Params)", [41, 1, 16])
PROJ = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", [56, 2, 1])
SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)", [82960, 1, 1])
# PyTorch's softmax backward (aten/src/ATen/native/cuda/PersistentSoftmax.cuh), is_log_softmax false
SOFTMAX_BWD = ("void (anonymous namespace)::softmax_warp_backward<c10::BFloat16, c10::BFloat16, float, 10, false, false>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, int, int, int, bool const*)", [4096, 1, 1])
# the log-softmax of a loss (trace: hta_a100_negative_log_softmax_fwdbwd): never attention
LOG_SOFTMAX = ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, int, int, int, bool const*, int, bool)", [16, 1, 1])
SCALE = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)", [10370, 1, 1])


def _kernels(b, seq, corr=0):
    for (name, grid), dur in seq:
        ev = b.kernel(name, corr, dur)
        ev["args"]["grid"] = grid
        if not corr:
            del ev["args"]["correlation"]


def test_training_kernels_only_forward_and_backward_are_one_call(tmp_path):
    """Two layers forward, a log-softmax loss between projections, then the backward in reverse: the
    backward's GEMMs around softmax_warp_backward join their forward's call."""
    b = TraceBuilder()
    layer = [(PROJ, 20.0), (QK, 100.0), (SCALE, 5.0), (SOFTMAX, 200.0), (AV, 80.0), (PROJ, 20.0)]
    backward = [(PROJ, 20.0), (AV, 70.0), (AV, 70.0), (SOFTMAX_BWD, 150.0), (SCALE, 5.0), (QK, 90.0), (QK, 90.0), (PROJ, 20.0)]
    _kernels(b, layer + layer + [(PROJ, 20.0), (LOG_SOFTMAX, 3.0), (PROJ, 20.0)] + backward + backward)
    r = analyze_file(str(b.write(tmp_path / "train.json")))
    assert r["calls"] == 2
    got = {(s["stage"], s["pass"]): s["gpu_us"] for s in r["stages"]}
    assert got[("softmax", "fwd")] == pytest.approx(400.0) and got[("softmax", "bwd")] == pytest.approx(300.0)
    assert got[("av_matmul", "bwd")] == pytest.approx(280.0) and got[("qk_matmul", "bwd")] == pytest.approx(360.0)
    assert got[("scale_mask", "fwd")] == pytest.approx(10.0)
    assert r["attention_gpu_us"] == pytest.approx(2 * (100 + 5 + 200 + 80) + 2 * (140 + 150 + 5 + 180))


def test_projection_gemms_around_a_softmax_are_no_call(tmp_path):
    """A softmax between unbatched GEMMs (grid z = 1: a router, a classifier head) is no attention."""
    b = TraceBuilder()
    _kernels(b, [(PROJ, 20.0), (SOFTMAX, 10.0), (PROJ, 20.0)] * 3)
    r = analyze_file(str(b.write(tmp_path / "router.json")))
    assert r["calls"] == 0


def test_safety_net_warns_for_unclaimed_softmax_between_batched_gemms(tmp_path):
    """Ops named by a custom library launch QKᵀ, softmax, AV: no op rule or path knows them, the
    kernels have ops (so no kernel-only call), and the safety net says so."""
    b = TraceBuilder()
    for i in range(3):
        t = b.t
        b.op("mylib::mix_a", t, 10.0)
        ev = b.kernel(QK[0], b.launch(t + 1), 100.0)
        ev["args"]["grid"] = QK[1]
        b.op("mylib::normalise", t + 12, 10.0)
        ev = b.kernel(SOFTMAX[0], b.launch(t + 13), 200.0)
        ev["args"]["grid"] = SOFTMAX[1]
        b.op("mylib::mix_b", t + 24, 10.0)
        ev = b.kernel(AV[0], b.launch(t + 25), 80.0)
        ev["args"]["grid"] = AV[1]
        b.t += 50
    r = analyze_file(str(b.write(tmp_path / "custom.json")))
    assert r["calls"] == 0
    (line,) = [w for w in r["warnings"] if "softmax kernel" in w]
    assert line.startswith("3 softmax kernels sit between batched GEMMs") and "600.0 µs" in line


# FlashAttention-2 decode with split-KV: Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h
# (v2.6 declares both kernels at global scope with DEFINE_FLASH_FORWARD_KERNEL; run_mha_fwd_splitkv_dispatch
# launches flash_fwd_splitkv_kernel, then flash_fwd_splitkv_combine_kernel<Kernel_traits, kBlockM, Log_max_splits, Is_even_K>)
FA2_SPLIT = "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false, false, false, false, true, false, true, false>(Flash_fwd_params)"
FA2_COMBINE = "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, 4, 5, true>(Flash_fwd_params)"


@pytest.mark.parametrize("ns", ["", "flash::"])
def test_fa2_split_kv_decode_from_a_cuda_graph_is_one_call_per_layer(tmp_path, ns):
    b = TraceBuilder()
    layers = 32
    split, combine = FA2_SPLIT.replace("void ", f"void {ns}", 1), FA2_COMBINE.replace("void ", f"void {ns}", 1)
    b.graph_replay([[(split, 20.0), (combine, 3.0)] for _ in range(layers)], between=MLP)
    r = analyze_file(str(b.write(tmp_path / "decode.json")))
    assert r["calls"] == layers  # not 64
    got = {s["stage"]: s["gpu_us"] for s in r["stages"]}
    assert got["fused"] == pytest.approx(20.0 * layers) and got["split_kv_reduce"] == pytest.approx(3.0 * layers)
