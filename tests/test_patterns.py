"""Every kernel-name family matches its own real example, and exclusions win over families."""

from __future__ import annotations

import re

import pytest

from tb_attn_plugin.attention import patterns as P


@pytest.mark.parametrize("fam", P.KERNEL_FAMILIES, ids=lambda f: f.family)
def test_family_matches_its_example(fam):
    assert re.search(fam.pattern, fam.example), fam.family
    assert P.kernel_family(fam.example) == fam, f"{fam.example!r} is taken by {P.kernel_family(fam.example)}"
    assert fam.source


@pytest.mark.parametrize("name,family", [
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*, float const*, int, int, int, bool const*, int, bool)", "softmax_fwd"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 8, true, false>(c10::Half*, c10::Half const*, int, int, int, bool const*, int, bool)", "exclude_log_softmax"),
    ("triton_red_fused__to_copy_add_addmm_as_strided_fmha_v3_fwd_mean_mul_neg_pow_rsqrt_stack_unbind_unsqueeze_view_24", "exclude_compiled_pointwise"),
    ("triton_per_fused__softmax_native_dropout_2", "softmax_fwd"),
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1::Params)", "gemm"),
    ("Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x128x64_MI16x16x1", "gemm"),
    ("void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, true>(Flash_fwd_params)", "pytorch_flash_fwd"),
    ("void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::half_t>>(Flash_bwd_params)", "flash_bwd_preprocess"),
    ("triton_tem_fused_flex_attention_backward_3", "flex_attention"),
    ("paged_attention_v2_kernel", "vllm_paged_attention"),
    # a combine/reduce kernel's name contains its attention kernel's: the sub-stage row must win
    ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, 4, 5, true>(Flash_fwd_params)", "flash_split_kv_combine"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, true, false, false, false, true, true, false, false>(Flash_fwd_params)", "flash_attn_2_fwd"),
    ("void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, 512, 32>(Flash_fwd_mla_params)", "flash_split_kv_combine"),
    ("paged_attention_ll4mi_reduce_kernel", "paged_attention_reduce"),
    ("paged_attention_ll4mi_QKV_mfma4_kernel", "rocm_paged_attention"),
    ("kernel_unified_attention_2d", "triton_unified_attention"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 7, 256, 1, false, true, cutlass::bfloat16_t, float, cutlass::arch::Sm90> >(...)", "flash_split_kv_combine"),
    ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, true> >(...)", "flash_bwd_preprocess"),
    ("kernel_cutlass_kernel_flash_attncuteflash_bwd_preprocessFlashAttentionBackwardPreprocess_object_at__tensor_0", "flash_bwd_preprocess"),
    ("kernel_cutlass_kernel_flash_attncuteflash_bwd_sm90FlashAttentionBackwardSm90_object_at__tensor_0", "flash_attn_4_cute"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernelMLA<(flashinfer::PosEncodingMode)0, 8u, 1u, 4u, 64u, 1u, flashinfer::BatchDecodeParamsMLA<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(...)", "flashinfer_mla"),
    ("void flashinfer::SinglePrefillWithKVCacheKernel<flashinfer::KernelTraits<...>, false, flashinfer::SinglePrefillParams<__half, __half, __half> >(...)", "flashinfer_prefill"),
    ("void flashinfer::MergeStatesKernel<8u, 16u, 8u, 1u, __nv_bfloat16, __nv_bfloat16>(__nv_bfloat16*, float*, __nv_bfloat16*, float*, unsigned int, unsigned int)", "merge_attn_states"),
    ("_attn_bwd_preprocess", "flash_bwd_preprocess"),
    ("bwd_preprocess", "flash_bwd_preprocess"),
    ("bwd_postprocess", "flash_bwd_postprocess"),
    ("void ck_tile::kentry<256, 1, ck_tile::FmhaFwdSplitKVCombineKernel<ck_tile::BlockFmhaFwdSplitKVCombinePipeline<...> > >(...)", "flash_split_kv_combine"),
    ("void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<...> > >(...)", "ck_fmha"),
    ("quant_per_thread_int8_kernel", "sage_quantize_triton"),
    ("_ZN5aiter32fmha_fwd_hd192_hd128_bf16_causalE", "aiter_asm_attention"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bEEv", None),  # an aiter kernel that is not attention
    ("void aiter::kn_get_mla_metadata_v1<true>(...)", "exclude_mla_metadata"),
    ("void qk_int_sv_f8_attn_kernel<128u, 64u, 32u, 64u, 128u>(signed char*)", "sage_attention"),
    ("void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)", "kv_cache_vllm"),
    ("void transformer_engine::fused_attn::thd_lse_kernel<false, LseCorrectionFunctor>(double*, float*, int*, int, int, int, int)", "context_parallel_correction"),
    ("void transformer_engine::fused_attn::cu_seqlens_padded_to_offsets(NVTE_QKV_Layout_Group, long, long, long, long, long, int*, int*, long*)", "exclude_te_seqlen_offsets"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<int>, at::detail::Array<char*, 1>)", None),
])
def test_real_names(name, family):
    got = P.kernel_family(name)
    assert (got.family if got else None) == family


def test_exclusions_come_first_then_sub_stages():
    names = [f.family for f in P.KERNEL_FAMILIES]
    rank = [0 if f.stage is None else 1 if f.stage in P.HELPER_STAGES else 2 if f.stage == "fused" else 3
            for f in P.KERNEL_FAMILIES]
    assert rank == sorted(rank), names


def test_every_family_has_a_known_stage_and_pass():
    from tb_attn_plugin.format.tags import STAGES

    for f in P.KERNEL_FAMILIES:
        assert f.stage is None or f.stage in STAGES or f.stage in P.CONTEXT_STAGES, f.family
        assert f.pass_ in ("fwd", "bwd", ""), f.family
        assert not (f.stage == "fused" and not f.implementation), f.family
    assert P.HELPER_STAGES <= set(STAGES)


@pytest.mark.parametrize("op,expected", [
    ("aten::_scaled_dot_product_flash_attention", ("flash", "flash")),
    ("aten::_scaled_dot_product_attention_math", ("math", "math")),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ("cpu_fused", "flash_cpu")),
    ("aiter::fmha_v3_fwd", ("aiter::fmha_v3_fwd", "aiter::fmha_v3_fwd")),
    ("vllm::unified_attention_with_output", ("vllm::unified_attention_with_output", "vllm::unified_attention_with_output")),
    ("aten::bmm", None),
    ("sageattention::qk_int8_sv_f16_accum_f16_attn", ("sageattention::qk_int8_sv_f16_accum_f16_attn",) * 2),
    ("_vllm_fa3_C::fwd", ("_vllm_fa3_C::fwd", "_vllm_fa3_C::fwd")),
    ("_C::paged_attention_v2", ("_C::paged_attention_v2", "_C::paged_attention_v2")),
    # ring attention (ring-flash-attn) calls FlashAttention's custom ops once per ring step
    ("flash_attn::_flash_attn_varlen_forward", ("flash_attn::_flash_attn_varlen_forward",) * 2),
])
def test_attention_ops(op, expected):
    assert P.attention_op(op) == expected


@pytest.mark.parametrize("cls,yes", [("BertSdpaSelfAttention", True), ("Owlv2Attention", True), ("T5Attention", True),
                                     ("MultiheadAttention", True), ("LlamaAttention", True), ("BertSelfOutput", False),
                                     ("T5LayerSelfAttention", True), ("Linear", False), ("AttentionBlock", False)])
def test_attention_modules(cls, yes):
    assert P.is_attention_module(cls) is yes


@pytest.mark.parametrize("cls,yes", [("ViTSelfOutput", True), ("BertSelfOutput", True), ("TimesformerSelfOutput", True),
                                     ("LxmertAttentionOutput", True), ("ViTOutput", False), ("BertOutput", False),
                                     ("T5LayerFF", False), ("Linear", False)])
def test_attention_output_modules(cls, yes):
    """The output projection as a module of its own beside the attention (HF BERT family), not a block's MLP output."""
    assert P.is_attention_output_module(cls) is yes
