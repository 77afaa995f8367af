"""The rules that decode a GPU kernel's name into fields (library, pass, dtype, math unit, tile, layout, arch, ...).

Data, not code: each row is (field, pattern, value, example, source). For each field the first row whose
pattern matches wins; ``value`` is a fixed text or a template over the match's groups (``{1}x{2}``).
Every example is a real kernel name and the test suite checks that each row decodes its own example.
Sources: the six shared traces (../shared/traces/README.md names their origin), the Hugging Face post
"Profiling in PyTorch (Part 3): Attention is all you profile" (huggingface/blog torch-attention-profile.md),
and the libraries' own naming (FlashAttention csrc/flash_attn/src, CUTLASS, Tensile).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..format.linear_regex import compile_linear


class Rule(msgspec.Struct, frozen=True):
    field: str
    pattern: str
    value: str  # fixed text, or a template over the groups: "{1}x{2}"
    example: str
    source: str

    def compiled(self) -> Any:
        return compile_linear(self.pattern)  # RE2: linear in the kernel name


H100_BERT = "shared trace tl_h100_bert_small_sdpa_flash (TraceLens, H100)"
H100_OWL = "shared trace tl_h100_owlv2_eager_bmm_softmax (TraceLens, H100)"
A100_HTA = "shared trace hta_a100_negative_log_softmax_fwdbwd (HTA, A100)"
MI300_BERT = "shared trace tl_mi300x_bert_small_sdpa_aotriton (TraceLens, MI300X)"
MI300_COMPILE = "shared trace tl_mi300x_torch_compile_small (TraceLens, MI300X)"
MI300_FLUX = "shared trace tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (TraceLens, MI300X)"
HF_POST = "HF blog torch-attention-profile.md (A100, bf16)"
FA_SRC = "Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h"

FLASH_EX = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
            "false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, "
            "false, false, false, false")
CUDNN_SDPA_EX = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0"
FMHA_EX = "fmha_cutlassF_bf16_aligned_64x64_rf_sm80"
SM90_GEMM_EX = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
CUTLASS80_EX = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)"
CUTLASS75_EX = "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1::Params)"
WMMA_EX = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"
TF32_EX = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)"
AMPERE_EX = "ampere_h16816gemm_256x128_ldg8_mods_stages_64x3_nt"
SGEMM_EX = "ampere_sgemm_128x128_mods_nt"
DGEMM_EX = "ampere_dgemm_128x64_mods_nt"
INT8_EX = "ampere_int8_i16832gemm_int8_256x128_ldg16_relu_mods_stages_64x3_nt"
NV_MODS = "cuBLAS kernel names in nvmexp/lw_firmware tools/mods/gpu/tests/lwca/linpack/ampere_mods_modular_decls.h"
SPLITK_EX = ("void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16, __nv_bfloat16, float, __nv_bfloat16, "
             "true, true, false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*")
CUDNN_XMMA_EX = ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
                 "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer")
CUDNN_WGRAD_EX = ("sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_"
                  "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train")
TENSILE_EX = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT96x96x128_MI16x16x1_SN_LDSB1_AFC1_AG0_AFEM1_AFEM1_ASEM1_"
              "CB0_CD1_1_CLR1_CADS0_DTLA0_DTLB0_DTLM0_DTVA0_DTVB0_DTVMXSA0_DTVMXSB0_DTVSM0_DPLB0_EPS0_ELFLR0_ISA942")
TENSILE_OLD_EX = ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_"
                  "CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMB_GLS0_ISA942_IU1_K1")
AITER_EX = "aiter::fmha_fwd_hd128_bf16_rtz"
TRITON_EX = "triton_poi_fused__unsafe_view_add_3"
ATEN_SOFTMAX_EX = ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 3, false, "
                   "false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)")
ATEN_FP32_EX = ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*, "
                "float const*, int, int, int, bool const*, int, bool)")
SPLITKV_EX = "flash_fwd_splitkv_kernel"  # the kernel's function name (FA_SRC); PyTorch's copy is pytorch_flash::
# Attention kernels of the families in attention/patterns.py, each a name as a trace or a profile prints it.
DEEPSEEK = ("deepseek-ai/profile-data prefill.json / decode.json (DeepSeek-V3 on H800, kineto traces; the kernel "
            "names as quoted by a public trace-analysis script's per-scenario kernel lists)")
FA3_EX = ("void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, "
          "true, flash::SingleTileScheduler, flash::SeqLenTraits<true> >(flash::CollectiveMainloopFwd<Flash_fwd_kernel_"
          "traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, true, flash::SeqLenTraits<true> >::Params, "
          "flash::CollectiveEpilogueFwd<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, "
          "flash::SeqLenTraits<true> >::Params, flash::SingleTileScheduler::Params, flash::SeqLenTraits<true>, "
          "flash::SeqLenTraits<true>)")
FA3_SM90_EX = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<"
               "2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<128>, cute::C<192> >, "
               "128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, false, false, false, true, "
               "true, false, false, false>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<128>, cute::C<128>, "
               "cute::C<128> >, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, cutlass::arch::Sm90, "
               "256, true, false, false, false>, flash::VarlenDynamicPersistentTileScheduler<128, 256, 32, false, false, "
               "true> > > >")
FA3_TILE_SHAPE = (r"CollectiveMainloopFwdSm\d+<\d+, cute::tuple<(?:cute::C<\d+>, )*cute::C<\d+> >, "
                  r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> >")
SGLANG_FA3 = "SGLang prefill on H800/H100 (FA3 via sgl-kernel), same public trace-analysis script's kernel lists"
MLA_COMBINE_EX = "void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, float, long, 512, 64>(Flash_fwd_mla_params)"
TRTLLM_EX = "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvSlidingOrChunkedCausalP16VarSeqQ128Kv128PersistentContext"
TRTLLM_SRC = ("AMD-AGI/TraceLens docs (TraceDiff example: vLLM FlashInfer backend on B200, "
              "flashinfer/prefill.py trtllm_batch_context_with_kv_cache -> cuLaunchKernelEx -> this kernel)")
TRTLLM_CAUSAL_EX = "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext"
TAXONOMY = "../shared/docs/attention-taxonomy.md (a B200 serving trace's decode kernel)"
CK_PREFILL_EX = "ck_tile::FmhaBatchPrefillWithPagedKVCacheKernel"
CK_SRC = ("ROCm/composable_kernel include/ck_tile/ops/fmha/kernel/fmha_batch_prefill_kernel.hpp (the kernel class; "
          "aiter's mha_batch_prefill instantiates it)")
VLLM_UA_SRC = ("vllm-project/vllm vllm/attention/ops/triton_unified_attention.py (@triton.jit kernel_unified_attention_2d; "
               "kernel_unified_attention_3d splits the KV into segments, then reduce_segments): Triton kernels carry "
               "their function's name only")
SAGE_QUANT_SRC = "ROCm/aiter aiter/ops/triton (SageAttention's @triton.jit sage_quant_kernel; issue 24: FLUX.1 trace)"
FFMA_EX = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
FFMA_SRC = ("public Stanford CS336 assignment-2 profiling write-ups on GitHub (nsys cuda_gpu_kern_sum of an FP32 "
            "Transformer on an H100/A100: the most expensive forward kernel)")
ROCM_PA_EX = ("void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, "
              "16, 128, 256, false, 1, 4>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16 const*, int, float, "
              "int const*, int const*, int const*, int, float const*, int, int, int, float*, float*, __hip_bfloat16*, "
              "__hip_bfloat16*, int, float const*, float const*, float const*)")
TENSILE_NAMES = ("ROCm/hipBLASLt tensilelite SolutionStructs (name component MI{M}x{N}x{B}: the MFMA instruction's "
                 "M x N and its blocks, K left to the data type); ROCm/Tensile Tensile/SolutionStructs.py (older "
                 "MI{M}x{N}x{K}x{B})")

RULES: tuple[Rule, ...] = (
    # -- library: the first row that matches names it -------------------------------------------------
    Rule("library", r"flash::compute_attn_ws|flash::FlashAttn(?:Fwd|Bwd)Sm\d+|flash::CollectiveMainloop(?:Fwd|Bwd)",
         "FlashAttention-3", FA3_EX, DEEPSEEK),
    Rule("library", r"flash_fwd\w*_mla|Flash_fwd_kernel_traits_mla|Flash_fwd_mla_params", "FlashMLA", MLA_COMBINE_EX,
         DEEPSEEK),
    Rule("library", r"flash_fwd|flash_bwd|pytorch_flash::", "FlashAttention", FLASH_EX, H100_BERT),
    Rule("library", r"^fmhaSm\d+", "TensorRT-LLM (trtllm-gen FMHA)", TRTLLM_EX, TRTLLM_SRC),
    Rule("library", r"ck_tile::", "CK tile (composable_kernel)", CK_PREFILL_EX, CK_SRC),
    Rule("library", r"^kernel_unified_attention_[23]d\b", "vLLM Triton (unified attention)", "kernel_unified_attention_3d",
         VLLM_UA_SRC),
    Rule("library", r"^sage_quant\w*|^sage_fwd", "SageAttention (aiter Triton)", "sage_quant_kernel", SAGE_QUANT_SRC),
    Rule("library", r"^cudnn_generated|cudnn_(?:train|infer)\b|_cudnn_(?:train|infer)$|^void cudnn::|cutlass_cudnn",
         "cuDNN", CUDNN_SDPA_EX, HF_POST),
    Rule("library", r"fmha_cutlass", "CUTLASS (PyTorch mem-efficient, xFormers kernels)", FMHA_EX, HF_POST),
    Rule("library", r"cublasLt::", "cuBLASLt", SPLITK_EX, H100_OWL),
    Rule("library", r"_cublas$|^(?:ampere|volta|turing|maxwell|hopper)_|cublas", "cuBLAS", SM90_GEMM_EX, H100_BERT),
    Rule("library", r"cutlass::Kernel|cutlass_\d+_", "CUTLASS (shipped in cuBLAS)", CUTLASS80_EX, H100_OWL),
    Rule("library", r"^aiter::", "aiter", AITER_EX, MI300_FLUX),
    Rule("library", r"^Cijk_", "hipBLASLt (Tensile)", TENSILE_EX, MI300_FLUX),
    Rule("library", r"^attn_fwd$|^attn_bwd", "AOTriton (PyTorch SDPA on ROCm)", "attn_fwd", MI300_BERT),
    Rule("library", r"^triton_", "Triton (torch.compile / Inductor)", TRITON_EX, MI300_COMPILE),
    Rule("library", r"^(?:Memset|Memcpy)\b", "runtime memset/memcpy (not a kernel)", "Memset (Device)", H100_OWL),
    Rule("library", r"^(?:void |std::enable_if<.*>::type )?(?:at::native::|\(anonymous namespace\)::)",
         "PyTorch (ATen)", ATEN_SOFTMAX_EX, H100_OWL),

    # -- pass --------------------------------------------------------------------------------------------
    Rule("pass", r"fmha_cutlassB|_bwd|_bprop|bprop_|backward|dgrad|wgrad", "bwd", CUDNN_WGRAD_EX, A100_HTA),
    Rule("pass", r"fmha_cutlassF|_fwd|fprop|forward", "fwd", CUDNN_SDPA_EX, HF_POST),
    Rule("pass", r"FlashAttnFwd|CollectiveMainloopFwd", "fwd", FA3_SM90_EX, SGLANG_FA3),
    # serving kernels are forward only: a prefill (context) or decode kernel, a KV cache read
    Rule("pass", r"^fmhaSm\d+\w*Kernel|BatchPrefill|^kernel_unified_attention_[23]d\b", "fwd", TRTLLM_EX, TRTLLM_SRC),
    Rule("pass", r"^sage_quant", "fwd (quantizes Q and K)", "sage_quant_kernel", SAGE_QUANT_SRC),

    # -- dtype (of the inputs) -----------------------------------------------------------------------------
    Rule("dtype", r"Qkv([A-Z][a-z]*\d+[a-z]*\d*)O([A-Z][a-z]*\d+[a-z]*\d*)", "QKV {1}, O {2}", TRTLLM_EX, TRTLLM_SRC),
    Rule("dtype", r"xmma_gemm_f32f32_f32f32_", "fp32", FFMA_EX, FFMA_SRC),
    Rule("dtype", r"bf16|bfloat16|BFloat16|__nv_bfloat16|_BBS_|_B_BS_", "bf16", CUTLASS80_EX, H100_OWL),
    Rule("dtype", r"(^|[^b])f16|fp16|half_t|c10::Half|_HHS_|_H_HS_|h16816|h1688|hgemm", "fp16", CUDNN_SDPA_EX, HF_POST),
    Rule("dtype", r"tf32|tensorop_s1688gemm_\d", "tf32", TF32_EX, A100_HTA),
    Rule("dtype", r"int8|i16832|i8816", "int8", INT8_EX, NV_MODS),
    Rule("dtype", r"sgemm|<float, float|\bfloat\*", "fp32", ATEN_FP32_EX, MI300_FLUX),
    Rule("dtype", r"dgemm|<double", "fp64", DGEMM_EX, NV_MODS),

    # -- math unit: tensor (matrix) cores or CUDA cores ------------------------------------------------------
    Rule("math_unit", r"(s16816|h16816|i8816|i16832|s1688|h1688|s161616|tensor16x8x\d+)", "tensor cores ({1})",
         AMPERE_EX, NV_MODS),
    # "xmma" and "warpgroupsize" alone say nothing: cuBLAS's FP32 (FFMA) kernels carry them too; a
    # low-precision or TF32 operand type next to a warpgroup size is Hopper's wgmma.
    Rule("math_unit", r"(bf16|f16|tf32|e4m3|e5m2).*warpgroup|warpgroup.*(bf16|f16|tf32|e4m3|e5m2)", "tensor cores (wgmma)", SM90_GEMM_EX, H100_BERT),
    Rule("math_unit", r"(wmma|hmma|tensorop)", "tensor cores ({1})", CUDNN_SDPA_EX, HF_POST),
    # a split-KV combine only reduces the splits' partial outputs: no matmul, whatever traits it carries
    Rule("math_unit", r"splitkv\w*combine|FlashAttnFwdCombine|FlashAttentionForwardCombine|SplitKVCombine",
         "no matrix unit (combine: a reduction)", MLA_COMBINE_EX, DEEPSEEK),
    # FA3 is Hopper's warp-specialised kernel: wgmma, whatever its traits are named
    Rule("math_unit", r"flash::compute_attn_ws|flash::FlashAttn(?:Fwd|Bwd)Sm90|CollectiveMainloop(?:Fwd|Bwd)Sm90",
         "tensor cores (wgmma)", FA3_EX, DEEPSEEK),
    Rule("math_unit", r"^fmhaSm1\d\d", "tensor cores (tcgen05)", TRTLLM_EX, TRTLLM_SRC),
    Rule("math_unit", r"Flash_fwd_kernel_traits|Flash_bwd_kernel_traits", "tensor cores (mma.sync)", FLASH_EX, FA_SRC),
    Rule("math_unit", r"_MI(\d+)x(\d+)x(\d+)x(\d+)_", "matrix cores (MFMA {1}x{2}x{3} instruction, {4} block)",
         "Cijk_Ailk_Bljk_HHS_BH_MT128x128x16_MI16x16x16x1_SN_1LDSB0_APM1_ABV0", TENSILE_NAMES),
    Rule("math_unit", r"_MI(\d+)x(\d+)x(\d+)_", "matrix cores (MFMA {1}x{2} instruction, {3} block; K from the dtype)",
         TENSILE_EX, TENSILE_NAMES),
    Rule("math_unit", r"mfma", "matrix cores (MFMA)", ROCM_PA_EX, "vllm-project/vllm csrc/rocm/attention.cu"),
    Rule("math_unit", r"_ffma_", "CUDA cores (FFMA)", FFMA_EX, FFMA_SRC),
    Rule("math_unit", r"(sgemm|dgemm|hgemm)", "CUDA cores ({1})", SGEMM_EX, NV_MODS),

    # -- tile ----------------------------------------------------------------------------------------------------
    Rule("tile", r"Flash_(?:fwd|bwd)_kernel_traits<(\d+), (\d+), (\d+), (\d+)", "{2}x{3} ({4} warps)",
         FLASH_EX, FA_SRC),
    Rule("tile", r"tilesize(\d+x\d+x\d+)", "{1}", SM90_GEMM_EX, H100_BERT),
    Rule("tile", r"^fmhaSm\d+\w*?Q(\d+)Kv(\d+)", "{1}x{2} (Q x KV)", TRTLLM_EX, TRTLLM_SRC),
    # FA3's CollectiveMainloopFwdSm90<stages, ClusterShape, TileShape<kBlockM, kBlockN, kHeadDim>, ...>
    Rule("tile", FA3_TILE_SHAPE, "{1}x{2}", FA3_SM90_EX, SGLANG_FA3),
    Rule("tile", r"_MT(\d+x\d+x\d+)_", "{1}", TENSILE_EX, MI300_FLUX),
    Rule("tile", r"knob_\d+_(\d+x\d+x\d+)", "{1}", CUDNN_SDPA_EX, HF_POST),
    Rule("tile", r"fmha_cutlass[FB]_\w+?_(\d+x\d+)_", "{1}", FMHA_EX, HF_POST),
    Rule("tile", r"gemm(?:_relu)?(?:_bf16|_f16)?_(\d+x\d+)_", "{1}", CUTLASS80_EX, H100_OWL),
    Rule("tile", r"gemm_(?:[a-z0-9]+_)?(\d+x\d+)_ldg", "{1}", AMPERE_EX, NV_MODS),
    Rule("tile", r"(?:sgemm|dgemm|hgemm)_(\d+x\d+)_", "{1}", SGEMM_EX, NV_MODS),

    # -- layout (operand transposes: n = as stored, t = transposed) ------------------------------------------------
    Rule("layout", r"_(tn|nn|nt|tt)(?:_|$|>)", "{1}", CUTLASS75_EX, H100_OWL),
    # Tensile: Cijk_<A's index order>_<B's index order>; Alik = A transposed, Bjlk = B transposed
    Rule("layout", r"^Cijk_Ailk_Bljk_", "nn", "Cijk_Ailk_Bljk_HHS_BH_MT128x128x16_MI16x16x16x1_SN_1LDSB0_APM1_ABV0",
         "ROCm MIOpenDriver gemm log (AMD_LOG_LEVEL=3), public code search"),
    Rule("layout", r"^Cijk_Alik_Bljk_", "tn", TENSILE_EX, MI300_FLUX),

    # -- target architecture the kernel was built for -------------------------------------------------------------
    Rule("arch", r"(?:^|_)sm_?(\d{2,3})(?:_|$|a)", "sm{1}", CUDNN_SDPA_EX, HF_POST),
    Rule("arch", r"^fmhaSm(\d+a?)", "sm{1}", TRTLLM_EX, TRTLLM_SRC),
    Rule("arch", r"cutlass::arch::Sm(\d+)", "sm{1}", FA3_SM90_EX, SGLANG_FA3),
    Rule("arch", r"flash::compute_attn_ws", "sm90", FA3_EX, DEEPSEEK),  # FA3's hopper/ kernels build for sm90 only
    Rule("arch", r"cutlass_(\d{2,3})_", "sm{1}", CUTLASS75_EX, H100_OWL),
    Rule("arch", r"^ampere_", "sm80", AMPERE_EX, HF_POST),
    Rule("arch", r"_ISA(\d+[a-f]?)(?:_|$)", "gfx{1}", TENSILE_EX, MI300_FLUX),

    # -- head dim, paging, causal mask ---------------------------------------------------------------------------
    Rule("head_dim", r"Flash_(?:fwd|bwd)_kernel_traits(?:_mla)?<(\d+),", "{1}", FA3_EX, DEEPSEEK),
    Rule("head_dim", FA3_TILE_SHAPE, "{3}", FA3_SM90_EX, SGLANG_FA3),
    Rule("head_dim", r"^fmhaSm\d+\w*?O[A-Z][a-z]*\d+[a-z]*\d*H(\d+)", "{1}", TRTLLM_EX, TRTLLM_SRC),
    Rule("head_dim", r"aiter::fmha_fwd_hd(\d+)", "{1}", AITER_EX, MI300_FLUX),
    Rule("paging", r"PagedKv|PagedKVCache|paged_attention", "paged KV cache", TRTLLM_EX, TRTLLM_SRC),
    Rule("causal", r"SlidingOrChunkedCausal", "sliding-window or chunked causal", TRTLLM_EX, TRTLLM_SRC),
    Rule("causal", r"^fmhaSm\d+\w*Causal", "causal", TRTLLM_CAUSAL_EX, TAXONOMY),
    Rule("causal", r"compute_attn_ws<Flash_fwd_kernel_traits<[^>]*>, true,", "causal", FA3_EX, DEEPSEEK),

    # -- cuDNN engine knob, split-K / split-KV --------------------------------------------------------------------
    Rule("knob", r"knob_(\d+)", "{1}", CUDNN_SDPA_EX, HF_POST),
    Rule("split", r"splitkv|split_kv|SplitKV", "split-KV", SPLITKV_EX, FA_SRC),
    Rule("split", r"^kernel_unified_attention_3d\b", "split-KV (segments, then reduce_segments)",
         "kernel_unified_attention_3d", VLLM_UA_SRC),
    Rule("split", r"^kernel_unified_attention_2d\b", "no split-KV", "kernel_unified_attention_2d", VLLM_UA_SRC),
    Rule("split", r"splitKreduce|split_k_kernel|segment_k_on", "split-K", SPLITK_EX, H100_OWL),
    Rule("split", r"segment_k_off", "no split-K", SM90_GEMM_EX, H100_BERT),
)

FIELDS = ("library", "pass", "dtype", "math_unit", "tile", "layout", "arch", "head_dim", "paging", "causal", "knob",
          "split")
