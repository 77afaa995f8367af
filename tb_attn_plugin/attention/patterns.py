"""What attention looks like in a trace, as data: kernel-name families and op names.

Every row carries a real example and where it was seen ((trace) = ../shared/traces, (blog), (issue),
(source), (cpu) = made here with torch 2.13). tests/test_patterns.py checks each row against its own
example, so a row without a matching example cannot land. Kernel names change across library
versions: add a row, never a special case in code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class KernelFamily:
    family: str
    pattern: str
    stage: str | None  # None: exclude (not attention, whatever the name suggests)
    pass_: str  # "fwd", "bwd" or "" when the op context decides
    implementation: str  # for fused families: what ran
    example: str
    source: str


# Order matters: exclusions first, then the first matching row wins.
KERNEL_FAMILIES: tuple[KernelFamily, ...] = (
    KernelFamily("exclude_log_softmax", r"softmax_warp_(forward|backward)<[^,]+,[^,]+,[^,]+,\s*\d+,\s*true|LogSoftMax\w*Epilogue", None, "", "",
                 "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, int, int, int, bool const*, int, bool)", "trace: hta_a100 negative control, under aten::_log_softmax"),
    KernelFamily("exclude_compiled_pointwise", r"^triton_(poi|red|per)_fused_\w*(scaled_dot_product|flash_attention|fmha|efficient_attention)", None, "", "",
                 "triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "trace: layout kernel named after the op it feeds"),
    KernelFamily("exclude_kv_cache", r"reshape_and_cache|store_kvcache", None, "", "",
                 "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)", "trace: vLLM KV-cache write"),
    KernelFamily("pytorch_flash_fwd", r"pytorch_flash::flash_fwd(_splitkv)?(_combine)?_kernel", "fused", "fwd", "flash",
                 "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)", "trace: tl_h100_bert_small_sdpa_flash"),
    KernelFamily("pytorch_flash_bwd", r"pytorch_flash::flash_bwd_(dq_dk_dv_loop(_seqk_parallel)?|dot_do_o|convert_dq)_kernel", "fused", "bwd", "flash",
                 "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, false, false, false, false, false, false>(pytorch_flash::Flash_bwd_params)", "issue: pytorch flash backward"),
    KernelFamily("mem_efficient_fwd", r"fmha_cutlassF_", "fused", "fwd", "efficient",
                 "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "blog: HF profiling part 3 (A100)"),
    KernelFamily("mem_efficient_bwd", r"fmha_cutlassB_", "fused", "bwd", "efficient",
                 "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 64, false>::Params)", "source: PyTorch mem-efficient backward"),
    KernelFamily("cudnn_sdpa_fwd", r"cudnn_generated_fort_native_sdpa_sm\d+_\w*fprop", "fused", "fwd", "cudnn",
                 "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0", "blog: HF profiling part 3 (A100)"),
    KernelFamily("cudnn_sdpa_bwd", r"cudnn_generated_fort_native_sdpa_sm\d+_\w*bprop", "fused", "bwd", "cudnn",
                 "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_cga1x1x1_kernel0_0", "source: cuDNN frontend SDPA backward"),
    KernelFamily("flash_attn_pkg", r"flash::flash_(fwd|bwd)_|FlashAttn(Fwd|Bwd)Sm\d+|flash_(fwd|bwd)_sm1\d\d|FlashAttention(Forward|Backward)Sm1\d\d", "fused", "", "flash_attn",
                 "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::half_t>, false, true, false, false, true, true, false>(Flash_fwd_params)", "issue: flash-attn package FA2"),
    KernelFamily("flex_attention", r"triton_tem_fused_\w*flex_attention", "fused", "", "flex",
                 "triton_tem_fused_flex_attention_0", "issue: compiled FlexAttention on GPU"),
    KernelFamily("aotriton_fwd", r"^attn_fwd\b", "fused", "fwd", "aotriton",
                 "attn_fwd", "trace: tl_mi300x_bert_small_sdpa_aotriton"),
    KernelFamily("aotriton_bwd", r"^bwd_kernel_(dk_dv|dq|fuse)\b|^bwd_preprocess", "fused", "bwd", "aotriton",
                 "bwd_kernel_dk_dv", "source: AOTriton backward kernels"),
    KernelFamily("ck_fmha", r"aiter::fmha_(fwd|bwd|v3)|Fmha(Fwd|Bwd|BatchPrefill)|_ZN7ck_tile6kentry\w*Fmha", "fused", "", "ck",
                 "aiter::fmha_fwd_hd128_bf16_rtz", "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"),
    KernelFamily("serving_fmha", r"fmhaSm\d+\w*Kernel|paged_attention_|kernel_unified_attention_[23]d", "fused", "fwd", "serving",
                 "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext", "trace: B200 serving trace quoted in the taxonomy"),
    KernelFamily("softmax_fwd", r"softmax_warp_forward<|cunn_SoftMaxForward(Reg|Smem)?<|SoftMaxForwardEpilogue|^triton_\w+_fused_\w*_softmax", "softmax", "fwd", "",
                 "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)", "trace: tl_h100_owlv2_eager_bmm_softmax"),
    KernelFamily("softmax_bwd", r"softmax_warp_backward<|cunn_SoftMaxBackward", "softmax", "bwd", "",
                 "void (anonymous namespace)::softmax_warp_backward<float, float, float, 7, false, false>(float*, float const*, float const*, int, int, int, bool const*)", "source: PyTorch softmax backward"),
    KernelFamily("dropout", r"fused_dropout_kernel|masked_scale_kernel", "dropout", "", "",
                 "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)", "trace: hta_a100 (dropout in a CNN)"),
    KernelFamily("gemm", r"gemm|Cijk_|nvjet_|xmma_gemm|s16816|s1688|s161616|cutlass|sgemm|hgemm", "matmul", "", "",
                 "cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1", "trace: tl_h100_owlv2_eager_bmm_softmax (QK^T)"),
)

_COMPILED = [(re.compile(f.pattern), f) for f in KERNEL_FAMILIES]


@lru_cache(maxsize=65536)
def kernel_family(name: str) -> KernelFamily | None:
    """The first family whose pattern matches ``name`` (exclusions included), or None."""
    for rx, fam in _COMPILED:
        if rx.search(name):
            return fam
    return None


def fused_family(name: str) -> KernelFamily | None:
    fam = kernel_family(name)
    return fam if fam is not None and fam.stage == "fused" else None


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
# Vendor/serving attention ops, matched by pattern; the implementation is the op name.
VENDOR_OP = re.compile(
    r"^(vllm::unified_attention\w*|aiter::(fmha\w*|mha\w*|flash_attn\w*|paged_attention\w*)|flash_attn::\w+|"
    r"_flash_attn_\w*forward|xformers::\w*attention\w*|sgl_kernel::\w*attention\w*|flashinfer::\w*)$"
)
# Module scopes that enclose one attention call: class names with "Attention" (HF eager and sdpa
# classes, nn.MultiheadAttention), but not containers of several layers.
ATTENTION_MODULE = re.compile(r"Attention|Attn", re.I)
ATTENTION_MODULE_EXCLUDE = re.compile(r"(Output|Block|Layer|Stack|Model|Encoder|Decoder|Pooler|Processor)s?$", re.I)

SOFTMAX_OPS = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax", "aten::special_softmax"})
NOT_ATTENTION_SOFTMAX = frozenset({"aten::log_softmax", "aten::_log_softmax"})
BMM_OPS = frozenset({"aten::bmm", "aten::baddbmm", "aten::matmul", "aten::einsum", "aten::_bmm"})
LINEAR_OPS = frozenset({"aten::linear", "aten::addmm", "aten::mm", "aten::_addmm_activation"})
DROPOUT_OPS = frozenset({"aten::dropout", "aten::native_dropout", "aten::feature_dropout", "aten::bernoulli_",
                         "aten::_fused_dropout", "aten::dropout_"})
SCALE_MASK_OPS = frozenset({"aten::mul", "aten::div", "aten::add", "aten::sub", "aten::masked_fill",
                            "aten::where", "aten::mul_", "aten::div_", "aten::add_", "aten::masked_fill_",
                            "aten::_masked_scale", "aten::tanh", "aten::clamp", "aten::maximum"})
COMPILED_REGION = re.compile(r"^(Torch-Compiled Region|CompiledFunction$|## Call CompiledFxGraph)")
TRITON_OP = re.compile(r"^triton_")


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
    return bool(VENDOR_OP.match(name))


@lru_cache(maxsize=65536)
def is_attention_module(class_name: str) -> bool:
    return bool(ATTENTION_MODULE.search(class_name)) and not ATTENTION_MODULE_EXCLUDE.search(class_name)


@lru_cache(maxsize=65536)
def needs_shapes(op_name: str) -> bool:
    """Ops whose Input Dims/types/Concrete Inputs the analysis reads (the reader drops the rest)."""
    return (op_name in ATTENTION_OPS or op_name in BMM_OPS or op_name in SOFTMAX_OPS or op_name in LINEAR_OPS
            or is_vendor_op(op_name) or op_name.startswith("tb_attn::"))


@lru_cache(maxsize=65536)
def is_backward_attention_op(name: str) -> bool:
    """aten::_scaled_dot_product_flash_attention_backward, aten::_efficient_attention_backward, ..."""
    return name.startswith("aten::_") and name.endswith("_backward") and "attention" in name
