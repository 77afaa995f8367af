"""The safety net's suggested [[family]] row (issue 24 item 4): the most distinctive token of the
unknown kernel's name, never a wrapper that GEMMs share, checked on the trace it came from.

Real names, shortened only where marked ``...``:
- FA3 backward, as quoted from a DeepSeek-V3-style H800 trace in issue 24 (its structure:
  Dao-AILab/flash-attention hopper/flash_bwd_kernel.h, mainloop_bwd_sm80/sm90, epilogue_bwd);
- CUTLASS's MLA decode kernel (NVIDIA/cutlass examples/77_blackwell_fmha
  kernel/sm100_fmha_mla_tma_warpspecialized.hpp, run by vLLM/SGLang ``cutlass_mla_decode``);
- FP8 GEMMs of the same wrapper: NVIDIA/cutlass include/cutlass/device_kernel.h (``device_kernel``),
  include/cutlass/gemm/kernel/gemm_universal.hpp (``GemmUniversal``), include/cutlass/gemm/dispatch_policy.hpp
  (``MainloopSm90TmaGmmaWarpSpecializedFP8``, ``KernelTmaWarpSpecializedPingpongFP8FastAccum``);
  vllm-project/vllm PR #23280 shows such a kernel in a profile as ``void cutlass::device_kernel<vllm::cutlass_3x_gemm_fp...``.
"""

from __future__ import annotations

import json
import re

import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.attention.safety import suggest_pattern
from tb_attn_plugin.attention.user_table import install_rows, parse
from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import TraceBuilder

FA3_BWD = ("void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2, cute::tuple<cute::C<1>, "
           "cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, cutlass::bfloat16_t, float, "
           "cutlass::arch::Sm90, true, false, false, false, 2, 2, 1, 2, 1, false>, flash::CollectiveEpilogueBwd<cute::tuple<"
           "cute::C<64>, cute::C<128>, cute::C<128> >, cutlass::bfloat16_t, cutlass::arch::Sm90, 256, false, 2, 1>, "
           "flash::SingleTileScheduler<false, false, false, 128>, true> >(flash::FlashAttnBwd<...>::Params)")
FA3_BWD_PRE = ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<128>, "
               "cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false> >(flash::FlashAttnBwdPreprocess<...>::Params)")
CUTLASS_MLA = ("void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaMlaKernelTmaWarpspecialized<cute::tuple<cute::C<128>, "
               "cute::C<128>, cute::tuple<cute::C<512>, cute::C<64> > >, cutlass::bfloat16_t, float, cutlass::bfloat16_t, float, "
               "cutlass::fmha::kernel::Sm100MlaPersistentTileScheduler, true> >(cutlass::fmha::kernel::"
               "Sm100FmhaMlaKernelTmaWarpspecialized<...>::Params)")
FP8_GEMMS = [
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::gemm::collective::"
    f"CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<{stages}, cute::tuple<cute::C<1>, cute::C<2>, cute::C<1> >, "
    f"cutlass::gemm::{schedule}>, cute::tuple<cute::C<{tile}>, cute::C<128>, cute::C<128> >, cutlass::float_e4m3_t, "
    "cute::tuple<long, cute::C<1>, long>, cutlass::float_e4m3_t, cute::tuple<long, cute::C<1>, long>, cute::TiledMMA<...>, "
    "cute::SM90_TMA_LOAD, ..., void, cute::identity>, cutlass::epilogue::collective::CollectiveEpilogue<...>, void, void> >"
    "(cutlass::gemm::kernel::GemmUniversal<...>::Params)"
    for stages, schedule, tile in ((4, "KernelTmaWarpSpecializedPingpongFP8FastAccum", 64),
                                   (5, "KernelTmaWarpSpecializedCooperativeFP8FastAccum", 128))]


@pytest.fixture(autouse=True)
def _no_user_rows():
    yield
    P.set_user_families(())


def test_suggestion_is_the_distinctive_token_not_the_shared_wrapper():
    others = FP8_GEMMS
    pattern, why = suggest_pattern(FA3_BWD, others, {FA3_BWD, FA3_BWD_PRE})
    assert pattern is not None and "device_kernel" not in pattern and "flash::FlashAttnBwd" in pattern
    assert re.search(pattern, FA3_BWD)
    assert not any(re.search(pattern, g) for g in FP8_GEMMS)
    assert not re.search(pattern, FA3_BWD_PRE)  # a whole token: the preprocess kernel is another row
    assert "none of its 2 other kernel names" in why
    pattern, _ = suggest_pattern(FA3_BWD_PRE, others, {FA3_BWD, FA3_BWD_PRE})
    assert "FlashAttnBwdPreprocess" in pattern and not re.search(pattern, FA3_BWD)


def test_no_token_that_claims_another_kernel_is_offered():
    # Every token of this unknown name also occurs in a kernel outside the unknown set: only the
    # whole name is safe.
    name = "void my_attn_kernel<128>(Params)"
    other = "void my_attn_kernel<64>(Params)"
    pattern, why = suggest_pattern(name, [other], {name})
    assert pattern == "^" + re.escape(name) + "$" and "whole name" in why
    assert not re.search(pattern, other)


def _trace(tmp_path, name: str):
    """Four CUTLASS MLA decode invocations replayed from a CUDA graph, each followed by the FP8
    GEMMs of the same ``cutlass::device_kernel`` wrapper (MoE and projections)."""
    b = TraceBuilder()
    b.graph_replay([[(CUTLASS_MLA, 30.0)] for _ in range(4)], between=[(g, 12.0) for g in FP8_GEMMS])
    return b.write(tmp_path / name)


def test_suggested_row_applied_as_offered_claims_only_the_attention_kernel(tmp_path):
    trace = _trace(tmp_path, "mla_fp8.json")
    before = analyze_file(str(trace))
    (row,) = before["unknown_kernels"]
    assert row["name"] == CUTLASS_MLA
    assert "device_kernel" not in row["pattern"] and "Sm100FmhaMlaKernelTmaWarpspecialized" in row["pattern"]
    assert "none of its 2 other kernel names" in row["pattern_why"]
    rows = parse("suggested.toml", row["toml"].encode())
    install_rows(rows)
    after = analyze_file(str(trace))
    # Before issue 24 the row said pattern = "cutlass::device_kernel": 12 "calls", the GEMMs among them.
    assert after["calls"] == 4
    assert after["attention_gpu_us"] == pytest.approx(4 * 30.0)
    assert after["unknown_kernels"] == []


# --- issue 24 item 5: nothing known disappears ------------------------------------------------

KV_WRITE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"
# FA3's backward sub-stages (issue 24's H800 trace; Dao-AILab/flash-attention hopper/flash_bwd_preprocess_kernel.h,
# flash_bwd_postprocess_kernel.h): the dO·O row sums before the backward kernel, the dQ conversion after it.
FA3_PRE = FA3_BWD_PRE
FA3_POST = ("void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<cute::C<64>, cute::C<128>, "
            "cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, 256, cute::SM90_64x128x16_F32BF16BF16_SS<"
            "(cute::GMMA::Major)0, (cute::GMMA::Major)1>, false, false, false> >(flash::FlashAttnBwdPostprocessConvertdQ<...>::Params)")


def _parts(acc):
    return acc["attention_calls_us"] + acc["not_attention_us"] + acc["unjoined_helpers_us"] + acc["unknown_us"]


def test_sub_stage_kernels_in_no_call_are_reported_with_their_time(tmp_path):
    """KV-cache writes replayed from a graph with no attention kernel near (the attention ran outside
    the window, or as a kernel nobody knows): before, their 9 µs appeared nowhere."""
    b = TraceBuilder()
    b.graph_replay([[(KV_WRITE, 3.0)] + [(g, 12.0) for g in FP8_GEMMS] for _ in range(3)])
    r = analyze_file(str(b.write(tmp_path / "kv_only.json")))
    assert r["calls"] == 0 and r["unknown_kernels"] == []
    (row,) = r["unjoined_kernels"]
    assert row["name"] == KV_WRITE and row["stage"] == "kv_cache_write" and row["family"] == "kv_cache_vllm"
    assert row["count"] == 3 and row["gpu_us"] == pytest.approx(9.0)
    assert row["share"] == pytest.approx(9.0 / r["total_gpu_us"], rel=1e-4)
    acc = r["gpu_accounting"]
    assert acc["unjoined_helpers_us"] == pytest.approx(9.0) and acc["attention_calls_us"] == 0
    assert acc["not_attention_us"] == pytest.approx(3 * 24.0)
    assert _parts(acc) == pytest.approx(r["total_gpu_us"])
    assert acc["accounted_share"] == pytest.approx(72.0 / 81.0, rel=1e-4)
    assert any("joined no attention call" in w and "reshape_and_cache" in w for w in r["warnings"])
    jsonschema = pytest.importorskip("jsonschema")
    import json
    from importlib import resources

    jsonschema.validate(r, json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text()))
    from tb_attn_plugin.report.text import render

    text = render(r)
    assert "attention sub-stages in no call" in text and "accounts for 88.9%" in text
    assert "reshape_and_cache_flash_kernel" in text


def test_fa3_backward_sub_stages_without_their_kernel_are_not_lost(tmp_path):
    """FA3's preprocess and dQ conversion kernels around FP8 GEMMs, launched by an op that says
    nothing about attention: they join no call, and are listed with their 1.9 ms-like time."""
    b = TraceBuilder()
    b.eager_calls([[(FA3_PRE, 40.0), (FP8_GEMMS[0], 100.0), (FA3_POST, 30.0)] for _ in range(2)], op_name="mylib::fused_op")
    r = analyze_file(str(b.write(tmp_path / "fa3_helpers.json")))
    got = {row["name"]: row for row in r["unjoined_kernels"]}
    assert got[FA3_PRE]["stage"] == "preprocess" and got[FA3_PRE]["pass"] == "bwd"
    assert got[FA3_PRE]["gpu_us"] == pytest.approx(80.0) and got[FA3_POST]["gpu_us"] == pytest.approx(60.0)
    acc = r["gpu_accounting"]
    assert acc["unjoined_helpers_us"] == pytest.approx(140.0) and acc["not_attention_us"] == pytest.approx(200.0)
    assert _parts(acc) == pytest.approx(r["total_gpu_us"])


def test_accounting_adds_up_on_recorded_and_real_traces(shared_traces):
    """Every real GPU trace: the four parts add up to the total, and attention calls are attention_gpu_us."""
    for f in sorted(shared_traces.glob("*.json.gz")):
        r = analyze_file(str(f))
        acc = r["gpu_accounting"]
        assert _parts(acc) == pytest.approx(r["total_gpu_us"], rel=1e-6, abs=0.01), f.name
        assert acc["attention_calls_us"] == pytest.approx(r["attention_gpu_us"], abs=0.01), f.name


# FA4's CuTe DSL kernel (the FA4 row's example in attention/patterns.py; Dao-AILab/flash-attention
# flash_attn/cute/flash_fwd_sm100.py); the second is the same class as another compile names it (its
# argument descriptors after _object_at_ follow the arguments: fp16 here), the third its backward.
FA4_FWD = "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tensorptrbf16gmemalign16odiv8_0"
FA4_FWD_FP16 = "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tensorptrf16gmemalign16odiv8_0"
FA4_BWD = "kernel_cutlass_kernel_flash_attncuteflash_bwd_sm100FlashAttentionBackwardSm100_object_at__tensorptrbf16gmemalign16odiv8_0"


def test_suggestion_survives_the_next_compile():
    """A CuTe DSL name's tail changes with its arguments: the row matches the class, not one compile."""
    pattern, why = suggest_pattern(FA4_FWD, FP8_GEMMS + [FA4_BWD], {FA4_FWD})
    assert re.search(pattern, FA4_FWD) and re.search(pattern, FA4_FWD_FP16)
    assert not re.search(pattern, FA4_BWD) and not any(re.search(pattern, g) for g in FP8_GEMMS)
    assert "object_at__tensorptr" not in pattern
    (fam,) = parse("suggested.toml", (
        f'[[family]]\nname = "x"\npattern = {json.dumps(pattern)}\nstage = "fused"\nexample = {json.dumps(FA4_FWD)}\n'
        'source = "test"\n').encode())  # the loader accepts it (no nested quantifier, matches its example)
    # Inductor numbers the kernels of a compiled graph (the flex_attention row's example, compiled
    # FlexAttention): the row matches any number, not the backward template nor the pointwise kernels.
    pattern, _ = suggest_pattern("triton_tem_fused_flex_attention_0", ["triton_poi_fused_add_0"], set())
    assert re.search(pattern, "triton_tem_fused_flex_attention_12") and not re.search(pattern, "triton_poi_fused_add_0")
    assert not re.search(pattern, "triton_tem_fused_flex_attention_backward_1")
