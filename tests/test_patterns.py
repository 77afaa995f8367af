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
    ("void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::half_t>>(Flash_bwd_params)", "pytorch_flash_bwd"),
    ("triton_tem_fused_flex_attention_backward_3", "flex_attention"),
    ("paged_attention_v2_kernel", "serving_fmha"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<int>, at::detail::Array<char*, 1>)", None),
])
def test_real_names(name, family):
    got = P.kernel_family(name)
    assert (got.family if got else None) == family


def test_exclusions_come_first():
    names = [f.family for f in P.KERNEL_FAMILIES]
    last_exclusion = max(i for i, f in enumerate(P.KERNEL_FAMILIES) if f.stage is None)
    first_family = min(i for i, f in enumerate(P.KERNEL_FAMILIES) if f.stage is not None)
    assert last_exclusion < first_family, names


@pytest.mark.parametrize("op,expected", [
    ("aten::_scaled_dot_product_flash_attention", ("flash", "flash")),
    ("aten::_scaled_dot_product_attention_math", ("math", "math")),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ("cpu_fused", "flash_cpu")),
    ("aiter::fmha_v3_fwd", ("aiter::fmha_v3_fwd", "aiter::fmha_v3_fwd")),
    ("vllm::unified_attention_with_output", ("vllm::unified_attention_with_output", "vllm::unified_attention_with_output")),
    ("aten::bmm", None),
])
def test_attention_ops(op, expected):
    assert P.attention_op(op) == expected


@pytest.mark.parametrize("cls,yes", [("BertSdpaSelfAttention", True), ("Owlv2Attention", True), ("T5Attention", True),
                                     ("MultiheadAttention", True), ("LlamaAttention", True), ("BertSelfOutput", False),
                                     ("T5LayerSelfAttention", True), ("Linear", False), ("AttentionBlock", False)])
def test_attention_modules(cls, yes):
    assert P.is_attention_module(cls) is yes
