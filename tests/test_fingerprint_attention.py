"""Fingerprints of the attention families' kernels (issue 46, item 9): each name read by hand from its structure
(the expected values below come from the name and its library's naming, not from the rules)."""

from __future__ import annotations

import pytest

from tb_attn_plugin.reading import fingerprint
from tb_attn_plugin.reading.fingerprint_rules import FIELDS, RULES

# FlashAttention-3 forward as DeepSeek-V3's H800 profile (deepseek-ai/profile-data prefill.json) names it:
# Flash_fwd_kernel_traits<kHeadDim 192, kBlockM 128, kBlockN 128, 12 warps, 2 stages, ...>, Is_causal = true
FA3 = ("void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, "
       "true, flash::SingleTileScheduler, flash::SeqLenTraits<true> >(flash::CollectiveMainloopFwd<Flash_fwd_kernel_"
       "traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, true, flash::SeqLenTraits<true> >::Params)")
# FlashMLA's split-KV combine in the same profile's decode.json
MLA_COMBINE = "void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, float, long, 512, 64>(Flash_fwd_mla_params)"
# PyTorch's own flash split-KV combine (attention/patterns.py, flash_split_kv_combine row)
PT_COMBINE = ("void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
              "cutlass::bfloat16_t>, 4, 5, true>(Flash_fwd_params)")
# TensorRT-LLM's trtllm-gen FMHA on B200 (AMD-AGI/TraceLens docs, a vLLM FlashInfer trace)
TRTLLM = "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunkedCausalP16VarSeqQ128Kv128PersistentContext"
# cuBLAS FP32 GEMM (FFMA: CUDA cores), Stanford CS336 assignment-2 nsys summaries
FFMA = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
# hipBLASLt on the MI300X (shared trace tl_mi300x_xdit_flux1_aiter_fmha_hipgraph): MI16x16x1 = MFMA M16 x N16, 1 block
TENSILE = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT96x96x128_MI16x16x1_SN_LDSB1_AFC1_AG0_AFEM1_AFEM1_ASEM1_"
           "CB0_CD1_1_CLR1_CADS0_DTLA0_DTLB0_DTLM0_DTVA0_DTVB0_DTVMXSA0_DTVMXSB0_DTVSM0_DPLB0_EPS0_ELFLR0_ISA942")


def test_fa3_is_wgmma_on_sm90_with_its_library():
    fp = fingerprint.decode(FA3)
    assert fp["library"] == "FlashAttention-3" and fp["math_unit"] == "tensor cores (wgmma)" and fp["arch"] == "sm90"
    assert (fp["pass"], fp["dtype"], fp["head_dim"], fp["causal"]) == ("fwd", "bf16", "192", "causal")
    assert fp["tile"].startswith("128x128")


@pytest.mark.parametrize("name", [MLA_COMBINE, PT_COMBINE])
def test_a_split_kv_combine_claims_no_tensor_cores(name):
    fp = fingerprint.decode(name)
    assert "tensor cores" not in (fp["math_unit"] or "") and fp["split"] == "split-KV"


def test_trtllm_fmha_name_carries_dtype_head_dim_tile_paging_mask_and_arch():
    fp = fingerprint.decode(TRTLLM)
    assert fp["library"].startswith("TensorRT-LLM") and fp["pass"] == "fwd"
    assert fp["dtype"] == "QKV E4m3, O Bfloat16" and fp["head_dim"] == "64" and fp["arch"] == "sm100a"
    assert fp["tile"].startswith("128x128") and fp["paging"] == "paged KV cache" and "causal" in fp["causal"]


def test_serving_kernels_are_no_longer_unknown():
    ck = fingerprint.decode("ck_tile::FmhaBatchPrefillWithPagedKVCacheKernel")
    assert ck["library"].startswith("CK tile") and ck["paging"] == "paged KV cache" and ck["pass"] == "fwd"
    two, three = (fingerprint.decode(f"kernel_unified_attention_{d}d") for d in (2, 3))
    assert two["library"] == three["library"] == "vLLM Triton (unified attention)"
    assert three["split"].startswith("split-KV") and two["split"] == "no split-KV"
    sage = fingerprint.decode("sage_quant_kernel")
    assert sage["library"].startswith("SageAttention") and "quantizes" in sage["pass"]
    for fp in (ck, two, three, sage):
        assert fingerprint.summary(fp) != "unknown"


def test_ffma_gemm_is_fp32_on_cuda_cores_and_flagged():
    fp = fingerprint.decode(FFMA)
    assert fp["dtype"] == "fp32" and fp["math_unit"] == "CUDA cores (FFMA)" and fp["arch"] == "sm80"
    flags = fingerprint.flags(fp, "sm90", "qk_matmul")
    assert any(f.startswith("FP32 matmul on CUDA cores") for f in flags)


def test_hipblaslt_mi_is_the_mfma_instruction_not_a_shape():
    unit = fingerprint.decode(TENSILE)["math_unit"]
    assert "16x16 instruction" in unit and "1 block" in unit and "16x16x1" not in unit


def test_every_field_has_a_row_and_every_row_a_source():
    assert {r.field for r in RULES} == set(FIELDS)
    assert all(r.source and r.example for r in RULES)
