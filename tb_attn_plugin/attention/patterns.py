"""What attention looks like in a trace, as data: kernel-name families and op names.

Every row carries a real example and where it was seen ((trace) = ../shared/traces, (blog), (issue),
(source), (cpu) = made here with torch 2.13). tests/test_patterns.py checks each row against its own
example, so a row without a matching example cannot land. Kernel names change across library
versions: add a row, never a special case in code (how: docs/kernels.md).

A row's stage is None (excluded: not attention whatever the name says), "fused" (an attention
kernel: a call of its own where no op explains it), one of HELPER_STAGES (the other kernels of a
multi-kernel call, never a call alone) or one of CONTEXT_STAGES (the launching op decides). Users
add rows from TOML (user_table.py); theirs are searched first.
"""

from __future__ import annotations

from functools import lru_cache

import msgspec

from ..format.linear_regex import FirstMatch, compile_linear


class KernelFamily(msgspec.Struct, frozen=True):
    family: str
    pattern: str
    stage: str | None  # None: exclude (not attention, whatever the name suggests)
    pass_: str  # "fwd", "bwd" or "" when the op context decides
    implementation: str  # for fused families: what ran
    example: str
    source: str


# Stages of the kernels that a fused attention call launches besides its attention kernel. A kernel
# of such a family is never a call of its own: it joins the call of its op, or (graph replay,
# compiled regions) the attention kernel next to it on its stream (attention/groups.py).
HELPER_STAGES = frozenset({"quantize", "kv_cache_write", "preprocess", "split_kv_reduce", "postprocess"})
# Families whose stage the launching op decides (a GEMM is QK^T in one call, a projection in another).
CONTEXT_STAGES = frozenset({"matmul", "softmax", "dropout"})


def _f(family, pattern, stage, pass_, implementation, example, source):
    return KernelFamily(family, pattern, stage, pass_, implementation, example, source)


# Order matters: exclusions first, then the sub-stages of multi-kernel calls (a combine kernel's name
# often contains its attention kernel's), then the attention kernels; the first matching row wins.
KERNEL_FAMILIES: tuple[KernelFamily, ...] = (
    # -- not attention, whatever the name suggests ------------------------------------------------
    _f("exclude_log_softmax", r"softmax_warp_(forward|backward)<[^,]+,[^,]+,[^,]+,\s*\d+,\s*true|LogSoftMax\w*Epilogue", None, "", "",
       "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, int, int, int, bool const*, int, bool)", "trace: hta_a100 negative control, under aten::_log_softmax"),
    _f("exclude_compiled_pointwise", r"^triton_(poi|red|per)_fused_\w*(scaled_dot_product|flash_attention|fmha|efficient_attention)", None, "", "",
       "triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "trace: layout kernel named after the op it feeds"),
    _f("exclude_mla_metadata", r"get_mla_metadata", None, "", "",
       "void get_mla_metadata_kernel<64, 5>(Mla_metadata_params)", "source: deepseek-ai/FlashMLA csrc/kernels/get_mla_metadata.cu (tile-scheduler index builder; aiter's csrc/kernels/mla/metadata.cu likewise)"),
    _f("exclude_fa3_scheduler", r"flash::prepare_varlen_num_blocks_kernel", None, "", "",
       "void flash::prepare_varlen_num_blocks_kernel<1, true>(int, int, int, int const*, int const*, int const*, int const*, int const*, int const*, int, int, int, int, int, cutlass::FastDivmod, cutlass::FastDivmod, int*, int*, int*, int*, bool)",
       "source: Dao-AILab/flash-attention hopper/flash_prepare_scheduler.cu (index builder, launched by vLLM before FA3)"),
    _f("exclude_te_seqlen_offsets", r"transformer_engine::fused_attn::(cu_seqlens\w*|populate_rng_state\w*|get_runtime_num_segments\w*)", None, "", "",
       "void transformer_engine::fused_attn::cu_seqlens_to_offsets<int>(long, long, long, long, long, int const*, int*, int*, int*, int*, int*, int*)",
       "source: NVIDIA/TransformerEngine transformer_engine/common/fused_attn/utils.cu (index builders of fused attention)"),
    # -- sub-stages of multi-kernel calls ---------------------------------------------------------
    _f("kv_cache_vllm", r"reshape_and_cache|store_kvcache|concat_and_cache_mla", "kv_cache_write", "fwd", "",
       "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)", "trace: vLLM KV-cache write (csrc/cache_kernels.cu); never a call of its own"),
    _f("kv_cache_flashinfer", r"flashinfer::AppendPagedKVCache\w*Kernel", "kv_cache_write", "fwd", "",
       "void flashinfer::AppendPagedKVCacheKernel<8u, 16u, __nv_bfloat16, int>(flashinfer::paged_kv_t<__nv_bfloat16, int>, __nv_bfloat16*, __nv_bfloat16*, int*, int*, unsigned int, unsigned int, unsigned long, unsigned long, unsigned long, unsigned long)",
       "source: flashinfer-ai/flashinfer include/flashinfer/page.cuh"),
    _f("kv_cache_ck", r"FmhaFwdAppendKVKernel", "kv_cache_write", "fwd", "",
       "void ck_tile::kentry<64, 1, ck_tile::FmhaFwdAppendKVKernel<ck_tile::BlockFmhaFwdAppendKVPipeline<ck_tile::BlockFmhaFwdAppendKVPipelineProblem<ck_tile::bf16_t> > > >(ck_tile::FmhaFwdAppendKVKernel<...>::Kargs)",
       "source: ROCm/composable_kernel include/ck_tile/ops/fmha/kernel/fmha_fwd_appendkv_kernel.hpp"),
    _f("sage_quantize_triton", r"^quant_per_(block|thread|warp)_int8_kernel|^quant_query_per_thread_int8_kernel|^quant_key_per_thread_int8_kernel|^sage_quant\w*", "quantize", "fwd", "sage",
       "quant_per_block_int8_kernel", "source: thu-ml/SageAttention sageattention/triton/quant_per_block.py (Q, K to int8 before the attention kernel); ROCm/aiter's Triton SageAttention quantizes with sage_quant_kernel (issue 24: FLUX.1 trace)"),
    _f("sage_quantize_cuda", r"\b(QuantInt8Kernel|SubMeanKernel|MeanScaleKernel|TransposePadPermuteKernel)<", "quantize", "fwd", "sage",
       "void QuantInt8Kernel<128u, 128u, 1u, false, true, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, signed char*, float*, float, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int)",
       "source: thu-ml/SageAttention csrc/fused/fused.cu"),
    _f("flash_bwd_preprocess", r"\b(flash::)?flash_bwd_dot_do_o_kernel|\b(flash::)?flash_bwd_clear_dkvaccum_kernel|flash::FlashAttnBwdPreprocess|FlashAttentionBackwardPreprocess|FmhaBwdOGradDotOKernel|^_attn_bwd_preprocess\b|^bwd_preprocess", "preprocess", "bwd", "",
       "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::half_t>>(Flash_bwd_params)",
       "issue: pytorch flash backward (dO·O row sums before the dQ/dK/dV kernel); also FA3 hopper/flash_bwd_preprocess_kernel.h, FA4 flash_attn/cute/flash_bwd_preprocess.py, CK FmhaBwdOGradDotOKernel, AOTriton tritonsrc/bwd_preprocess.py, Triton tutorial _attn_bwd_preprocess"),
    _f("flash_bwd_postprocess", r"\b(flash::)?flash_bwd_convert_dq_kernel|\b(flash::)?flash_bwd_convert_dkv_kernel|flash::FlashAttnBwdPostprocess|FlashAttentionBackwardPostprocess|FmhaBwdConvertQGradKernel|^bwd_postprocess\b", "postprocess", "bwd", "",
       "void flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, true>(Flash_bwd_params, int)",
       "source: Dao-AILab/flash-attention csrc/flash_attn/src/flash_bwd_kernel.h (fp32 dQ accumulator to the output dtype); also FA3/FA4 postprocess, CK FmhaBwdConvertQGradKernel, AOTriton tritonsrc/bwd_postprocess.py"),
    _f("flash_split_kv_combine", r"\b(flash::)?flash_fwd_splitkv_combine_kernel|flash::FlashAttnFwdCombine|FlashAttentionForwardCombine|splitkv_mla_combine|FmhaFwdSplitKVCombineKernel", "split_kv_reduce", "fwd", "",
       "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, 4, 5, true>(Flash_fwd_params)",
       "source: pytorch/pytorch aten/src/ATen/native/transformers/cuda/flash_attn/flash_fwd_kernel.h (also FA2: Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h declares flash_fwd_splitkv_combine_kernel at global scope up to v2.6, in namespace flash after; FA3 FlashAttnFwdCombine, FA4 FlashAttentionForwardCombine, FlashMLA flash_fwd_splitkv_mla_combine_kernel, CK FmhaFwdSplitKVCombineKernel)"),
    _f("paged_attention_reduce", r"paged_attention_v2_reduce_kernel|paged_attention_ll4mi_reduce_kernel", "split_kv_reduce", "fwd", "serving",
       "void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, int const*, int)",
       "source: vllm-project/vllm csrc/attention/attention_kernels.cuh (also csrc/rocm/attention.cu paged_attention_ll4mi_reduce_kernel)"),
    _f("triton_unified_reduce", r"^reduce_segments\b", "split_kv_reduce", "fwd", "serving",
       "reduce_segments", "source: vllm-project/vllm vllm/v1/attention/ops/triton_unified_attention.py (after kernel_unified_attention_3d)"),
    _f("merge_attn_states", r"merge_attn_states_kernel|flashinfer::\w*MergeState\w*Kernel", "split_kv_reduce", "fwd", "",
       "void vllm::merge_attn_states_kernel<__nv_bfloat16, 128u>(__nv_bfloat16*, float*, __nv_bfloat16 const*, float const*, __nv_bfloat16 const*, float const*, unsigned int, unsigned int, unsigned int)",
       "source: vllm-project/vllm csrc/attention/merge_attn_states.cu (also flashinfer include/flashinfer/attention/cascade.cuh MergeStatesKernel)"),
    _f("aiter_mla_reduce", r"kn_mla_reduce_v\d", "split_kv_reduce", "fwd", "ck",
       "void aiter::kn_mla_reduce_v1_ps<128, 32, 64>(aiter::MlaReduceKernelV1Params)", "source: ROCm/aiter csrc/kernels/mla/reduce.cu (after the split-KV MLA decode kernel)"),
    _f("xformers_splitk_reduce", r"^_splitK_reduce\b", "split_kv_reduce", "fwd", "xformers",
       "_splitK_reduce", "source: facebookresearch/xformers xformers/ops/fmha/_triton/splitk_kernels.py"),
    _f("context_parallel_correction", r"thd_(out_correction|lse|grad_correction)_kernel", "split_kv_reduce", "", "te",
       "void transformer_engine::fused_attn::thd_out_correction_kernel<__nv_bfloat16, false, 16, true>(__nv_bfloat16*, __nv_bfloat16*, float*, float*, int*, int, int, int, int, int)",
       "source: NVIDIA/TransformerEngine transformer_engine/common/fused_attn/context_parallel.cu (ring attention: merges each step's output and LSE)"),
    # -- attention kernels ------------------------------------------------------------------------
    _f("pytorch_flash_fwd", r"pytorch_flash::flash_fwd(_splitkv)?_kernel", "fused", "fwd", "flash",
       "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)", "trace: tl_h100_bert_small_sdpa_flash"),
    _f("pytorch_flash_bwd", r"pytorch_flash::flash_bwd_dq_dk_dv_loop(_seqk_parallel)?_kernel", "fused", "bwd", "flash",
       "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, false, false, false, false, false, false>(pytorch_flash::Flash_bwd_params)", "issue: pytorch flash backward"),
    _f("mem_efficient_fwd", r"fmha_cutlassF_", "fused", "fwd", "efficient",
       "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "blog: HF profiling part 3 (A100); the same cutlass kernels ran as xformers' cutlass op"),
    _f("mem_efficient_bwd", r"fmha_cutlassB_", "fused", "bwd", "efficient",
       "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 64, false>::Params)", "source: PyTorch mem-efficient backward (xformers' cutlass backward)"),
    _f("cudnn_sdpa_fwd", r"cudnn_generated_fort_native_sdpa_sm\d+_\w*fprop", "fused", "fwd", "cudnn",
       "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0", "blog: HF profiling part 3 (A100); cuDNN frontend SDPA, also what TransformerEngine's fused attention runs (it builds cuDNN graphs)"),
    _f("cudnn_sdpa_bwd", r"cudnn_generated_fort_native_sdpa_sm\d+_\w*bprop", "fused", "bwd", "cudnn",
       "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_cga1x1x1_kernel0_0", "source: cuDNN frontend SDPA backward"),
    _f("flash_attn_2_fwd", r"flash::flash_fwd(_splitkv)?_kernel", "fused", "fwd", "flash_attn",
       "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>, false, true, false, false, true, true, false>(Flash_fwd_params)", "issue: flash-attn package FA2 (csrc/flash_attn/src/flash_fwd_kernel.h)"),
    _f("flash_attn_2_bwd", r"flash::flash_bwd_dq_dk_dv_loop(_seqk_parallel)?_kernel", "fused", "bwd", "flash_attn",
       "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false, false, false>(Flash_bwd_params)",
       "source: Dao-AILab/flash-attention csrc/flash_attn/src/flash_bwd_kernel.h"),
    # FlashAttention-3 by the structure of its names, old and new: the mid-2024 warp-specialised kernel
    # flash::compute_attn_ws<Flash_{fwd,bwd}_kernel_traits...> (its backward takes CollectiveMainloopBwd
    # params), then the kernel classes flash::FlashAttn{Fwd,Bwd}[Sm90]<flash::CollectiveMainloop{Fwd,Bwd}...>,
    # inside cutlass::device_kernel<...> or not. Backward first: a backward name may hold "Fwd" nowhere,
    # a forward one never holds "Bwd".
    _f("flash_attn_3_bwd", r"\bflash::(FlashAttnBwd(Sm\d+)?<|compute_dqkv\w*<|compute_attn_ws\w*<[^(]*(Flash_bwd_kernel_traits|CollectiveMainloopBwd))|\bflash::CollectiveMainloopBwd", "fused", "bwd", "flash_attn",
       "void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<…, cutlass::arch::Sm90, …>, …>>",
       "issue 24: DeepSeek-V3-style H800 training trace (mid-2024 FA3, Dao-AILab/flash-attention hopper/flash_bwd_kernel.h class FlashAttnBwd<CollectiveMainloop_, CollectiveEpilogue_, TileScheduler_>); newer hopper/flash_bwd_kernel_sm90.h FlashAttnBwdSm90"),
    _f("flash_attn_3_fwd", r"\bflash::(FlashAttnFwd(Sm\d+)?<|compute_attn_ws\w*<)|\bflash::CollectiveMainloopFwd", "fused", "fwd", "flash_attn",
       "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, …>",
       "issue 24: DeepSeek-V3-style H800 training trace, MLA head dims 192/128 (mid-2024 FA3 hopper/flash_fwd_kernel.h compute_attn_ws; compute_attn_ws_fp8 likewise); newer hopper/flash_fwd_kernel_sm90.h FlashAttnFwdSm90 inside cutlass::device_kernel<flash::enable_sm90_or_later<...>>"),
    # FA2-line kernels not named above, by their traits: early FA2 declared its kernels outside the
    # flash:: namespace (a renamed or new kernel over the same templates is caught alike)
    _f("flash_attn_2_bwd_traits", r"\b(flash::)?flash_\w+<[^(]*\bFlash_bwd_kernel_traits<", "fused", "bwd", "flash_attn",
       "void flash_bwd_dq_dk_dv_loop_seqq_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, 4, false, false, cutlass::half_t>, true, false, false, false>(Flash_bwd_params)",
       "source: Dao-AILab/flash-attention v2.0 csrc/flash_attn/src/flash_bwd_launch_template.h (__global__ flash_bwd_dq_dk_dv_loop_seqq_parallel_kernel at global scope)"),
    _f("flash_attn_2_fwd_traits", r"\b(flash::)?flash_\w+<[^(]*\bFlash_fwd_kernel_traits<", "fused", "fwd", "flash_attn",
       "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>, false, true, false, false, true, true, false>(Flash_fwd_params)",
       "source: Dao-AILab/flash-attention v2.4 csrc/flash_attn/src/flash_fwd_launch_template.h (__global__ flash_fwd_kernel at global scope, calling flash::compute_attn)"),
    _f("flash_attn_4_cute", r"FlashAttention(Forward|Backward)Sm\d+|flash_(fwd|bwd)_sm1\d\d", "fused", "", "flash_attn",
       "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tensorptrbf16gmemalign16odiv8_0",
       "source: Dao-AILab/flash-attention flash_attn/cute/flash_fwd_sm100.py (FA4, CuTe DSL: the kernel is named kernel_cutlass_kernel_<module><class>_object_at_...); Sm80/Sm90/Sm100 classes, Backward likewise"),
    _f("flex_attention", r"triton_tem_fused_\w*flex_attention", "fused", "", "flex",
       "triton_tem_fused_flex_attention_0", "issue: compiled FlexAttention on GPU"),
    _f("triton_tutorial_fwd", r"^_attn_fwd\b", "fused", "fwd", "triton_attention",
       "_attn_fwd", "source: triton-lang/triton python/tutorials/06-fused-attention.py (also SageAttention's Triton kernel, sageattention/triton/attn_qk_int8_per_block.py)"),
    _f("triton_tutorial_bwd", r"^_attn_bwd\b", "fused", "bwd", "triton_attention",
       "_attn_bwd", "source: triton-lang/triton python/tutorials/06-fused-attention.py"),
    _f("aotriton_fwd", r"^attn_fwd\b", "fused", "fwd", "aotriton",
       "attn_fwd", "trace: tl_mi300x_bert_small_sdpa_aotriton"),
    _f("aotriton_bwd", r"^bwd_kernel_(dk_dv|dq|fuse)\b", "fused", "bwd", "aotriton",
       "bwd_kernel_dk_dv", "source: ROCm/aotriton tritonsrc/bwd_kernel_dk_dv.py (also bwd_kernel_dq.py, bwd_kernel_fuse.py)"),
    _f("aiter_asm_attention", r"_ZN5aiter\d+(fmha_|pa_|mla_)", "fused", "", "ck",
       "_ZN5aiter42pa_bf16_pertokenFp8_gqa10_1tg_4w_mtp3_msk1E", "source: ROCm/aiter hsa/ assembly kernels (paged attention pa_*, fmha_fwd/bwd_*, mla_*), named by their mangled symbol in ROCm traces"),
    _f("ck_fmha", r"aiter::fmha_(fwd|bwd|v3)|Fmha(Fwd|Bwd|BatchPrefill)|_ZN7ck_tile6kentry\w*Fmha", "fused", "", "ck",
       "aiter::fmha_fwd_hd128_bf16_rtz", "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (CK tile FmhaFwdKernel/FmhaBwdDQDKDVKernel/FmhaFwdSplitKVKernel/FmhaBatchPrefillWithPagedKVCacheKernel likewise)"),
    _f("flashinfer_mla", r"flashinfer::mla::\w+Kernel|BatchDecodeWithPagedKVCacheKernelMLA|BatchMLAPagedAttention\w*Kernel", "fused", "fwd", "flashinfer",
       "void flashinfer::mla::BatchMLAPagedAttentionKernel<flashinfer::mla::KernelTraits<true, 2u, 2u, 8u, 512u, 64u, 64u, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int>, flashinfer::MLAParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(flashinfer::MLAParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)",
       "source: flashinfer-ai/flashinfer include/flashinfer/attention/mla.cuh"),
    _f("flashinfer_prefill", r"flashinfer::\w*PrefillWith\w*Kernel|flashinfer::PODWith\w*Kernel", "fused", "fwd", "flashinfer",
       "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, 128u, 1u, 4u, 8u, 8u, 1u, 4u, (flashinfer::PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, flashinfer::DefaultAttention<false, false, false, false> >, flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)",
       "source: flashinfer-ai/flashinfer include/flashinfer/attention/prefill.cuh (paged and ragged KV; Single/Batch; POD in pod.cuh)"),
    _f("flashinfer_decode", r"flashinfer::\w*DecodeWith\w*Kernel", "fused", "fwd", "flashinfer",
       "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, flashinfer::DefaultAttention<false, false, false, false>, flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)",
       "source: flashinfer-ai/flashinfer include/flashinfer/attention/decode.cuh"),
    _f("flash_mla", r"flash_fwd_splitkv_mla_kernel|flash_fwd_mla_kernel|sm\d+::\w*mla\w*_kernel", "fused", "fwd", "flash_mla",
       "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, flash::SharedStorageMLA<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512> > >(Flash_fwd_mla_params)",
       "source: deepseek-ai/FlashMLA csrc/flash_fwd_mla_kernel.h (then flash_fwd_splitkv_mla_combine_kernel)"),
    _f("sage_attention_aiter", r"^sage_fwd\w*", "fused", "fwd", "sage",
       "sage_fwd", "source: ROCm/aiter aiter/ops/triton (fav3_sage: @triton.jit def sage_fwd; sage_fwd_mxfp4 likewise); issue 24: FLUX.1 trace"),
    _f("sage_attention", r"\bqk_int\d*_sv_f\d+\w*", "fused", "fwd", "sage",
       "void qk_int_sv_f16_attn_kernel<128u, 64u, 32u, 64u, 128u, (DataType)0, (QuantGranularity)2, (QuantGranularity)2, float, false, __nv_bfloat16, (ComputeUnit)0, (MaskMode)0, false, false>(signed char*, signed char*, __half*, __nv_bfloat16*, float*, float*, float*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, float)",
       "source: thu-ml/SageAttention csrc/qattn/qk_int_sv_f16_cuda_sm80.cu (qk_int_sv_f8_attn_kernel in the sm89/sm90 files)"),
    _f("xformers_splitk", r"^_fwd_kernel_splitK\b", "fused", "fwd", "xformers",
       "_fwd_kernel_splitK", "source: facebookresearch/xformers xformers/ops/fmha/_triton/splitk_kernels.py (then _splitK_reduce)"),
    _f("vllm_paged_attention", r"paged_attention_v[12]_kernel", "fused", "fwd", "serving",
       "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(float*, float*, __nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16 const*, int, float, int const*, int const*, int, float const*, int, int, int, float const*, float const*, int, int, int)",
       "source: vllm-project/vllm csrc/attention/attention_kernels.cuh (v2 splits the KV and ends with paged_attention_v2_reduce_kernel)"),
    _f("rocm_paged_attention", r"paged_attention_ll4mi_QKV_mfma\d+_kernel|paged_attention_ll4mi_QKV_kernel", "fused", "fwd", "serving",
       "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, 16, 128, 256, false, 1, 4>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16 const*, int, float, int const*, int const*, int const*, int, float const*, int, int, int, float*, float*, __hip_bfloat16*, __hip_bfloat16*, int, float const*, float const*, float const*)",
       "source: vllm-project/vllm csrc/rocm/attention.cu (then paged_attention_ll4mi_reduce_kernel)"),
    _f("triton_unified_attention", r"kernel_unified_attention_[23]d", "fused", "fwd", "serving",
       "kernel_unified_attention_3d", "source: vllm-project/vllm vllm/v1/attention/ops/triton_unified_attention.py (3d splits the KV into segments, then reduce_segments)"),
    _f("trtllm_fmha", r"fmhaSm\d+\w*Kernel", "fused", "fwd", "serving",
       "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext", "trace: B200 serving trace quoted in the taxonomy (TensorRT-LLM / FlashInfer trtllm-gen kernels)"),
    # -- stage decided by the launching op --------------------------------------------------------
    _f("softmax_fwd", r"softmax_warp_forward<|cunn_SoftMaxForward(Reg|Smem)?<|SoftMaxForwardEpilogue|^triton_\w+_fused_\w*_softmax", "softmax", "fwd", "",
       "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)", "trace: tl_h100_owlv2_eager_bmm_softmax"),
    _f("softmax_bwd", r"softmax_warp_backward<|cunn_SoftMaxBackward", "softmax", "bwd", "",
       "void (anonymous namespace)::softmax_warp_backward<float, float, float, 7, false, false>(float*, float const*, float const*, int, int, int, bool const*)", "source: PyTorch softmax backward"),
    _f("dropout", r"fused_dropout_kernel|masked_scale_kernel", "dropout", "", "",
       "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)", "trace: hta_a100 (dropout in a CNN)"),
    _f("gemm", r"gemm|Cijk_|nvjet_|xmma_gemm|s16816|s1688|s161616|cutlass|sgemm|hgemm", "matmul", "", "",
       "cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1", "trace: tl_h100_owlv2_eager_bmm_softmax (QK^T)"),
)

_user_families: tuple[KernelFamily, ...] = ()
_BUILT_IN = FirstMatch([f.pattern for f in KERNEL_FAMILIES])  # RE2: a name cannot make them slow
_USER: list = []  # the user's rows compiled, asked before the built-in ones


def set_user_families(rows: tuple[KernelFamily, ...] | list[KernelFamily]) -> None:
    """Put a user's rows (attention/user_table.py) ahead of the built-in table; () removes them."""
    global _user_families, _USER
    from .safe_regex import compile_untrusted

    _user_families = tuple(rows)
    # A user's pattern is untrusted: RE2, which cannot backtrack (safe_regex.py), as ours are.
    _USER = [(compile_untrusted(f.pattern), f) for f in _user_families]
    kernel_family.cache_clear()


def user_families() -> tuple[KernelFamily, ...]:
    return _user_families


def effective_families() -> tuple[KernelFamily, ...]:
    """The table in the order it is searched: the user's rows first, then the built-in ones."""
    return _user_families + KERNEL_FAMILIES


@lru_cache(maxsize=65536)
def kernel_family(name: str) -> KernelFamily | None:
    """The first family whose pattern matches ``name`` (exclusions included), or None."""
    for rx, fam in _USER:
        if rx.search(name):
            return fam
    i = _BUILT_IN.index(name)
    return KERNEL_FAMILIES[i] if i >= 0 else None


def fused_family(name: str) -> KernelFamily | None:
    fam = kernel_family(name)
    return fam if fam is not None and fam.stage == "fused" else None


def helper_family(name: str) -> KernelFamily | None:
    """The family of a kernel that is part of a multi-kernel call but never a call alone."""
    fam = kernel_family(name)
    return fam if fam is not None and fam.stage in HELPER_STAGES else None


# --- Ops --------------------------------------------------------------------------------------

# Forward attention ops: op name -> (implementation, SDPA backend). The outermost of a nest is one
# call; the innermost names what ran.
ATTENTION_OPS: dict[str, tuple[str, str]] = {
    "aten::scaled_dot_product_attention": ("sdpa", ""),
    "aten::_scaled_dot_product_flash_attention": ("flash", "flash"),
    "aten::_flash_attention_forward": ("flash", "flash"),
    "aten::_scaled_dot_product_efficient_attention": ("efficient", "efficient"),
    "aten::_efficient_attention_forward": ("efficient", "efficient"),
    "aten::_scaled_dot_product_cudnn_attention": ("cudnn", "cudnn"),
    "aten::_cudnn_attention_forward": ("cudnn", "cudnn"),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("cpu_fused", "flash_cpu"),
    "aten::_scaled_dot_product_attention_math": ("math", "math"),
    "aten::_scaled_dot_product_attention_math_for_mps": ("math", "math"),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("fused", "overrideable"),
    "aten::_native_multi_head_attention": ("mha_fastpath", ""),
    "FlexAttentionAutogradOp": ("flex", "flex"),
    "FlexAttentionHOP": ("flex", "flex"),
}
# Ops whose own kernels are the fused attention kernel (the rest they launch is `other`).
FUSED_OPS = frozenset({
    "aten::_flash_attention_forward", "aten::_efficient_attention_forward", "aten::_cudnn_attention_forward",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_fused_attention_overrideable",
})
# Attention ops that are not aten's, as data: torch.library / extension ops in attention namespaces
# (role "fused": the op runs the attention kernel itself, every other kernel under it is a helper) and
# custom autograd Functions around a whole attention (role "function": the op is a container, the ops
# and kernels under it decide their stages; autograd records its backward node as "<name>Backward").
# A name matches the first row whose pattern matches it whole; role None excludes (an index builder
# in an attention namespace). Each row keeps a real example and where it was seen; the order is
# exclusions first. tests/test_patterns.py checks every row against its example.
class AttentionOpRule(msgspec.Struct, frozen=True):
    rule: str
    pattern: str
    role: str | None  # "fused", "function", or None: not attention
    example: str
    source: str


def _o(rule, pattern, role, example, source):
    return AttentionOpRule(rule, pattern, role, example, source)


ATTENTION_OP_RULES: tuple[AttentionOpRule, ...] = (
    # -- not attention, although the namespace is --------------------------------------------------
    _o("exclude_scheduler_metadata", r"\w+::\w*get_\w*(scheduler|mla)\w*metadata\w*", None,
       "flash_attn_3::get_scheduler_metadata",
       "source: Dao-AILab/flash-attention hopper/flash_api_torch_lib.cpp (ops.def get_scheduler_metadata: split/tile plan, no attention)"),
    # -- torch.library / extension ops that run the attention kernel ------------------------------
    _o("flash_attn_ops", r"flash_attn::\w+|_flash_attn_\w*forward", "fused",
       "flash_attn::_flash_attn_varlen_forward",
       "source: Dao-AILab/flash-attention flash_attn/flash_attn_interface.py (custom ops flash_attn::_flash_attn_{,varlen_}{forward,backward}; ring-flash-attn calls them once per ring step)"),
    _o("flash_attn_3_ops", r"flash_attn_3::\w+", "fused",
       "flash_attn_3::fwd",
       "source: Dao-AILab/flash-attention hopper/flash_api_torch_lib.cpp and flash_attn_interface.py (torch.ops.flash_attn_3.fwd / bwd / fwd_combine)"),
    _o("vllm_flash_attn_ops", r"_vllm_fa[234]_C::\w+", "fused",
       "_vllm_fa3_C::fwd",
       "source: vllm-project/flash-attention (vllm_flash_attn registers FA2/FA3 as _vllm_fa2_C / _vllm_fa3_C)"),
    _o("flashmla_ops", r"_flashmla_C::\w+", "fused",
       "_flashmla_C::fwd_kvcache_mla",
       "source: vllm-project/vllm vllm/attention/ops/flashmla.py (torch.ops._flashmla_C.fwd_kvcache_mla)"),
    _o("vllm_unified_attention", r"vllm::unified_(mla_)?attention\w*", "fused",
       "vllm::unified_attention_with_output",
       "source: vllm-project/vllm vllm/attention/layer.py (direct_register_custom_op unified_attention{,_with_output})"),
    _o("vllm_paged_attention", r"_C::paged_attention_v[12]|_rocm_C::paged_attention\w*", "fused",
       "_C::paged_attention_v2",
       "source: vllm-project/vllm csrc/torch_bindings.cpp (ops.def paged_attention_v1/v2); csrc/rocm/torch_bindings.cpp"),
    _o("aiter_attention", r"aiter::(fmha\w*|mha\w*|flash_attn\w*|paged_attention\w*)", "fused",
       "aiter::fmha_v3_fwd", "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (57 calls); ROCm/aiter aiter/ops/mha.py"),
    _o("sgl_kernel_attention", r"sgl_kernel::(fwd|fwd_sparse|fwd_kvcache_mla\w*|\w*attention\w*|\w*mla_decode\w*)", "fused",
       "sgl_kernel::fwd",
       "source: sgl-project/sglang sgl-kernel/python/sgl_kernel/flash_attn.py (torch.ops.sgl_kernel.fwd.default: FA3; flash_mla.py fwd_kvcache_mla)"),
    _o("xformers_ops", r"xformers::\w*attention\w*|xformers_flash\d?::flash_(fwd|bwd)", "fused",
       "xformers::efficient_attention_forward_cutlass",
       "source: facebookresearch/xformers xformers/csrc/attention (TORCH_LIBRARY xformers); xformers/ops/fmha/flash.py (xformers_flash::flash_fwd)"),
    _o("sageattention_ops", r"sageattention::\w+", "fused",
       "sageattention::qk_int8_sv_f16_accum_f16_attn",
       "source: thu-ml/SageAttention sageattention/core.py (the qk_int8_sv_* kernels as torch ops)"),
    _o("flashinfer_ops", r"flashinfer::((batch|single)_\w*(prefill|decode|mla|pod)\w*|\w*xqa\w*)", "fused",
       "flashinfer::batch_decode_with_paged_kv_cache_run",
       "source: flashinfer-ai/flashinfer python/flashinfer/decode.py (register_custom_op flashinfer::{uri}_run; the namespace also holds rmsnorm, router GEMMs, all-reduce: not attention)"),
    # -- custom autograd Functions around a whole attention (and their ...Backward nodes) ----------
    _o("flash_attn_functions", r"\w*Flash\w*Attn\w*Func\w*", "function",
       "FlashAttnVarlenFunc",
       "source: Dao-AILab/flash-attention flash_attn/flash_attn_interface.py (FlashAttnFunc, FlashAttnVarlenFunc, FlashAttnQKVPackedFunc, ...; hopper/flash_attn_interface.py likewise); the issue's RopeLoraFlashAttnVarlenFunc"),
    _o("attention_functions", r"\w*(Attn|Attention)\w*(Func|Function)\w*|\w*(Func|Function)\w*(Attn|Attention)\w*", "function",
       "FusedAttnFunc",
       "source: NVIDIA/TransformerEngine transformer_engine/pytorch/attention.py (FusedAttnFunc; context_parallel AttnFuncWithCPAndKVP2P); zhuzilin/ring-flash-attention RingFlashAttnVarlenFunc"),
    _o("xformers_function", r"_fMHA", "function",
       "_fMHA", "source: facebookresearch/xformers xformers/ops/fmha/__init__.py (class _fMHA(torch.autograd.Function))"),
    _o("triton_tutorial_function", r"_attention", "function",
       "_attention", "source: triton-lang/triton python/tutorials/06-fused-attention.py (class _attention(torch.autograd.Function))"),
)
_OP_RULES = FirstMatch([r.pattern for r in ATTENTION_OP_RULES], "fullmatch")
BACKWARD_NODE_SUFFIX = compile_linear(r"Backward\d*$")


@lru_cache(maxsize=65536)
def op_rule(name: str) -> AttentionOpRule | None:
    """The first row of ATTENTION_OP_RULES that matches ``name`` whole (exclusions included), or None."""
    i = _OP_RULES.index(name)
    return ATTENTION_OP_RULES[i] if i >= 0 else None


@lru_cache(maxsize=65536)
def attention_function(name: str) -> AttentionOpRule | None:
    """The row of a custom autograd Function around a whole attention (its forward op), or None."""
    rule = op_rule(name)
    return rule if rule is not None and rule.role == "function" else None


@lru_cache(maxsize=65536)
def attention_function_backward(name: str) -> AttentionOpRule | None:
    """The row of the Function whose backward node ``name`` is (``FlashAttnVarlenFuncBackward``), or None."""
    if not BACKWARD_NODE_SUFFIX.search(name):
        return None
    return attention_function(BACKWARD_NODE_SUFFIX.sub("", name))


# Module scopes that enclose one attention call: class names with "Attention" (HF eager and sdpa
# classes, nn.MultiheadAttention), but not containers of several layers.
ATTENTION_MODULE = compile_linear(r"Attention|Attn", ignore_case=True)
ATTENTION_MODULE_EXCLUDE = compile_linear(r"(Output|Block|Layer|Stack|Model|Encoder|Decoder|Pooler|Processor)s?$", ignore_case=True)
# An attention module's output projection when it is a module of its own beside the attention, both
# inside an outer attention module: HF's BERT family splits XAttention into XSelfAttention (Q, K, V,
# the score path) and XSelfOutput (the output projection, dropout, its norm): ViTAttention, BertAttention,
# DeiTAttention, TimeSformerAttention; LxmertAttentionOutput in Lxmert. There the call's scope is the
# outer module (detect.py), so the output projection's time and blocks are attention's.
ATTENTION_OUTPUT_MODULE = compile_linear(r"(SelfOutput|AttentionOutput)$", ignore_case=True)

SOFTMAX_OPS = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax", "aten::special_softmax"})
SOFTMAX_BACKWARD_OPS = frozenset({"aten::_softmax_backward_data"})  # softmax's backward, inside a Function's backward
# A softmax written out (x - max, exp, / sum), as course and research code does: the exp is the anchor,
# the max and subtraction may precede it, a sum and a division (or reciprocal and product) follow it.
WRITTEN_SOFTMAX_EXP = frozenset({"aten::exp", "aten::exp_"})
WRITTEN_SOFTMAX_BEFORE = frozenset({"aten::amax", "aten::max", "aten::sub", "aten::sub_", "aten::detach"})
WRITTEN_SOFTMAX_AFTER = frozenset({"aten::sum", "aten::div", "aten::div_", "aten::reciprocal", "aten::mul", "aten::mul_"})
WRITTEN_SOFTMAX_SUM = frozenset({"aten::sum"})
WRITTEN_SOFTMAX_NORMALISE = frozenset({"aten::div", "aten::div_", "aten::reciprocal", "aten::mul", "aten::mul_"})
NOT_ATTENTION_SOFTMAX = frozenset({"aten::log_softmax", "aten::_log_softmax"})
BMM_OPS = frozenset({"aten::bmm", "aten::baddbmm", "aten::matmul", "aten::einsum", "aten::_bmm"})
LINEAR_OPS = frozenset({"aten::linear", "aten::addmm", "aten::mm", "aten::_addmm_activation"})
DROPOUT_OPS = frozenset({"aten::dropout", "aten::native_dropout", "aten::feature_dropout", "aten::bernoulli_",
                         "aten::_fused_dropout", "aten::dropout_"})
SCALE_MASK_OPS = frozenset({"aten::mul", "aten::div", "aten::add", "aten::sub", "aten::masked_fill",
                            "aten::where", "aten::mul_", "aten::div_", "aten::add_", "aten::masked_fill_",
                            "aten::_masked_scale", "aten::tanh", "aten::clamp", "aten::maximum"})
COMPILED_REGION = compile_linear(r"^(Torch-Compiled Region|CompiledFunction$|## Call CompiledFxGraph)")
TRITON_OP = compile_linear(r"^triton_")


@lru_cache(maxsize=65536)
def attention_op(name: str) -> tuple[str, str] | None:
    """(implementation, backend) when ``name`` is a forward attention op."""
    hit = ATTENTION_OPS.get(name)
    if hit is not None:
        return hit
    if is_vendor_op(name):
        return (name, name)  # the op is the backend; its kernel family says what ran (e.g. ck)
    return None


@lru_cache(maxsize=65536)
def is_vendor_op(name: str) -> bool:
    """A torch.library / extension op that runs attention (a "fused" row of ATTENTION_OP_RULES)."""
    rule = op_rule(name)
    return rule is not None and rule.role == "fused"


@lru_cache(maxsize=65536)
def is_attention_module(class_name: str) -> bool:
    return bool(ATTENTION_MODULE.search(class_name)) and not ATTENTION_MODULE_EXCLUDE.search(class_name)


@lru_cache(maxsize=65536)
def is_attention_output_module(class_name: str) -> bool:
    return bool(ATTENTION_OUTPUT_MODULE.search(class_name))


@lru_cache(maxsize=65536)
def needs_shapes(op_name: str) -> bool:
    """Ops whose Input Dims/types/Concrete Inputs the analysis reads (the reader drops the rest)."""
    return (op_name in ATTENTION_OPS or op_name in BMM_OPS or op_name in SOFTMAX_OPS or op_name in LINEAR_OPS
            or op_name in WRITTEN_SOFTMAX_EXP or is_vendor_op(op_name) or op_name.startswith("tb_attn::")
            or op_name in KV_EXPAND_OPS or op_name in INDEX_ARITH_OPS)


# Ops whose input dtypes show position or mask index arithmetic inside an attention call (reading/expected.py
# _index_ops: integer tensors in, or the float chain between them): the elementwise, cast, fill, min/max, where
# and lookup ops such arithmetic is written with. Source: pytorch/pytorch aten/src/ATen/native/
# native_functions.yaml; example: huggingface/transformers models/t5/modeling_t5.py T5Attention.compute_bias
# and _relative_position_bucket (arange, sub, gt, to, mul, abs, lt, div, log, full_like, min, where, add_,
# embedding), seen in tl_mi300x_xdit_flux1_aiter_fmha_hipgraph.
INDEX_ARITH_OPS = frozenset({
    "aten::arange", "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::rsub", "aten::mul", "aten::mul_",
    "aten::div", "aten::div_", "aten::floor_divide", "aten::remainder", "aten::neg", "aten::abs", "aten::sign",
    "aten::log", "aten::gt", "aten::lt", "aten::ge", "aten::le", "aten::eq", "aten::ne", "aten::copy_",
    "aten::fill_", "aten::minimum", "aten::maximum", "aten::clamp", "aten::clamp_min", "aten::clamp_max",
    "aten::where", "aten::embedding", "aten::index_select", "aten::gather", "aten::index", "aten::cumsum",
    "aten::bucketize",
})


# Ops whose shapes show K/V's own head count before a repeat (attention/heads.py reads them): an
# ``expand`` of K [B, Hkv, 1, L, D] to [B, Hkv, r, L, D] (then a reshape to Hkv·r heads) in
# transformers' repeat_kv, or of a one-head [B, 1, L, D] to [B, H, L, D] (MQA). Source: huggingface/
# transformers models/llama/modeling_llama.py repeat_kv (hidden_states[:, :, None, :, :].expand(...)).
KV_EXPAND_OPS = frozenset({"aten::expand"})


@lru_cache(maxsize=65536)
def is_backward_attention_op(name: str) -> bool:
    """aten::_scaled_dot_product_flash_attention_backward, aten::_efficient_attention_backward, ..."""
    return name.startswith("aten::_") and name.endswith("_backward") and "attention" in name
