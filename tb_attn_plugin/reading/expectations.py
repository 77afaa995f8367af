"""What each attention implementation should run per forward, and the known causes of more, as data.

Every row carries a real example and where it was seen ((blog) = Hugging Face, "Profiling in PyTorch
(Part 3): Attention is all you profile", huggingface/blog torch-attention-profile.md, A100, bf16;
(source) = PyTorch's code; (cpu) = recorded here with torch 2.13 on the CPU). expected.py reads them;
a trace that runs other names needs a row here, never a special case there.

A "step" of attention (qk_matmul, scale, mask, softmax, dropout, av_matmul, fused) is expected to cost
one kernel on a GPU, or one op that does work on a CPU trace (see WORK_FREE_OPS). What runs beyond
the expected steps is an extra, named by the first CAUSES row that explains it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import msgspec

from ..format.linear_regex import compile_linear


class Expectation(msgspec.Struct, frozen=True):
    implementation: str
    steps: tuple[str, ...]  # the steps expected per forward; "scale?", "mask?", "dropout?" only when the call has one
    transposes: int | None  # metadata-only aten::transpose inside the fused op per call (None: no claim)
    reason_unknown: str  # when steps is empty: why no count is claimed
    example: str
    source: str


UNFUSED_STEPS = ("qk_matmul", "scale?", "mask?", "softmax", "dropout?", "av_matmul")
MATH_STEPS = ("qk_matmul", "scale", "mask?", "softmax", "dropout?", "av_matmul")  # math always scales (attention.cpp)
FUSED_STEPS = ("fused",)

_E = Expectation
EXPECTATIONS: tuple[Expectation, ...] = (
    _E("eager", UNFUSED_STEPS, None, "",
       "matmul, mul, masked_fill, softmax, matmul: 5 kernels expected, 6 ran (a Memcpy)",
       "blog: 'Naive attention', the guess before opening the trace; 04_a_naive_attention.py"),
    _E("math", MATH_STEPS, None, "",
       "aten::_scaled_dot_product_attention_math: scale, matmul, add_ mask, _safe_softmax, matmul; 20 kernels ran on an A100",
       "source: pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp _scaled_dot_product_attention_math; blog 'Math backend'"),
    _E("flash", FUSED_STEPS, 4, "", "void pytorch_flash::flash_fwd_kernel<...>: 1 kernel per forward, 4 aten::transpose",
       "blog: 'Flash backend' and 'No transposes' (Figure 19)"),
    _E("efficient", FUSED_STEPS, 4, "", "fmha_cutlassF_bf16_aligned_64x64_rf_sm80: 1 kernel per forward, 4 aten::transpose",
       "blog: 'Efficient backend' and 'No transposes' (Figure 20)"),
    _E("cudnn", FUSED_STEPS, 0, "",
       "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0: 1 kernel, no transpose",
       "blog: 'cuDNN backend' (Figure 21: _cudnn_attention_forward goes straight to aten::empty and the kernel)"),
    _E("cpu_fused", FUSED_STEPS, None, "", "aten::_scaled_dot_product_flash_attention_for_cpu: one op does the work",
       "cpu: torch 2.13 F.scaled_dot_product_attention on CPU tensors (its children are empty and transpose only)"),
    _E("flex", FUSED_STEPS, None, "", "triton_tem_fused_flex_attention_0: 1 Triton template kernel per forward",
       "source: pytorch/pytorch torch/_inductor/kernel/flex_attention.py (one template kernel per compiled flex_attention)"),
    _E("compiled", (), None, "Inductor fuses per graph: no fixed count per attention call",
       "triton_per_fused__softmax_0 between two extern mm kernels", "source: pytorch/pytorch torch/_inductor (fusion decided per graph)"),
    # nn.MultiheadAttention called with need_weights=True (its default), as the collector records it: the
    # weights must exist, so F.multi_head_attention_forward runs the explicit path, not SDPA.
    _E("mha_weights", UNFUSED_STEPS, None, "",
       "MultiheadAttention (need_weights=True): baddbmm, softmax, bmm on the CPU; 5 ops ran with 2 layout copies",
       "source: pytorch/pytorch torch/nn/functional.py multi_head_attention_forward (need_weights: baddbmm/bmm, "
       "softmax, dropout, bmm; else scaled_dot_product_attention); cpu: torch 2.13 with tb_attn_plugin.profile"),
    _E("mha_fastpath", (), None, "nn.MultiheadAttention's fast path includes its projections and picks SDPA inside",
       "aten::_native_multi_head_attention", "source: pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp native_multi_head_attention"),
)
# Any other implementation (vendor ops, kernel families: flash_attn, sage, ck, aotriton, ...) is one
# fused kernel plus the helper kernels its family table names (attention/patterns.py HELPER_STAGES).
DEFAULT_FUSED = _E("fused", FUSED_STEPS, None, "", "void flash::flash_fwd_kernel<...>: 1 kernel per forward",
                   "source: attention/patterns.py fused families (each a single attention kernel per call)")
UNFUSED_IMPLEMENTATIONS = frozenset({"eager", "math"})
NEED_WEIGHTS_FIX = ("need_weights=True (nn.MultiheadAttention's default) runs the explicit path (bmm, softmax, bmm): "
                    "pass need_weights=False when the weights are not used, and the call runs SDPA's fused kernel")

# A family's helper kernels (attention/patterns.py HELPER_STAGES, each family row with its real example):
# not steps of the table, so each is an extra of its own, with what it is and whether anything is to fix.
HELPER_CAUSES: dict[str, tuple[str, str, str]] = {
    "kv_cache_write": ("KV-cache write: the new keys and values stored into the (paged) cache before attention reads it",
                       "none needed per call: part of serving (fusing it with rotary/quantization saves a launch)",
                       "attention/patterns.py kv_cache_* rows: vLLM csrc/cache_kernels.cu reshape_and_cache*, "
                       "flashinfer AppendPagedKVCache, CK FmhaFwdAppendKVKernel"),
    "quantize": ("quantization of Q/K before a quantized attention kernel (SageAttention's int8 or fp8 inputs)",
                 "none needed: the price of the quantized kernel's speed", "attention/patterns.py sage_quantize_* rows: "
                 "thu-ml/SageAttention sageattention/triton/quant_per_block.py, csrc/fused/fused.cu"),
    "split_kv_reduce": ("split-KV combine: the splits' partial outputs merged (a reduction, no matmul)",
                        "none needed: split-KV fills the GPU for short queries over long keys",
                        "attention/patterns.py split-KV reduce rows: flash_fwd_splitkv_combine_kernel, vLLM "
                        "paged_attention_v2_reduce_kernel, reduce_segments, merge_attn_states"),
    "preprocess": ("backward preprocess (dO·O row sums) ran in the forward's window", "", "attention/patterns.py "
                   "flash_bwd_preprocess row"),
    "postprocess": ("backward postprocess (dQ accumulator conversion) ran in the forward's window", "",
                    "attention/patterns.py flash_bwd_postprocess row"),
}


def expectation(implementation: str) -> Expectation:
    for e in EXPECTATIONS:
        if e.implementation == implementation:
            return e
    return DEFAULT_FUSED


class Cause(msgspec.Struct, frozen=True, dict=True):  # dict: room for its cached_propertys
    """A cause of extra kernels; ``example`` is an op path ("outer > ... > the op that ran"), checked by the tests."""

    cause: str
    item: str  # regex on the op that ran the work (its launching op on a GPU)
    inside: str  # regex one of its enclosing ops (within the call) must match; "" = any
    not_inside: str  # regex none of its enclosing ops may match; "" = none
    what: str
    fix: str
    example: str
    source: str
    within: str = ""  # regex a second enclosing op must match; "" = none asked
    item_not: str = ""  # regex the op must not match (RE2 has no lookahead); "" = none
    # True: only an op of index arithmetic (expected.py _index_ops): at or after the call's first QK^T and
    # outside any attention op, the op takes an integer tensor (INDEX_DTYPES, rank >= 1) and no other tensor
    # of SCORES_RANK or more, or takes only tensors shaped like such integer tensors before it in the call
    # (their float chain: a cast, log, div)
    index_operands: bool = False

    @cached_property
    def within_rx(self) -> Any:
        return compile_linear(self.within)

    @cached_property
    def item_rx(self) -> Any:
        return compile_linear(self.item)

    @cached_property
    def item_not_rx(self) -> Any:
        return compile_linear(self.item_not)

    @cached_property
    def inside_rx(self) -> Any:
        return compile_linear(self.inside)

    @cached_property
    def not_inside_rx(self) -> Any:
        return compile_linear(self.not_inside)


# The ops of the fused SDPA backends (attention/patterns.py FUSED_OPS): a fill inside them is a buffer, not a mask.
FUSED_OP = r"^aten::_(scaled_dot_product_(flash|efficient|cudnn|fused)_attention|flash_attention_forward|efficient_attention_forward|cudnn_attention_forward)"

MASK_WHAT = "the mask (or bias) is built inside every call (ones -> tril, scalar_tensor -> fill_, where; GPU triu_tril_kernel)"
# The dtypes of integer tensors as the profiler records them ("Input type"; c10 names for the others) and the
# rank of the scores and of q, k, v ([B, H, S, *] or [B*H, S, *]): index arithmetic never takes a floating one.
INDEX_DTYPES = frozenset({"long int", "int", "short int", "signed char", "unsigned char", "bool", "unsigned int",
                          "unsigned short", "unsigned long", "long long int", "c10::UInt16", "c10::UInt32",
                          "c10::UInt64"})
SCORES_RANK = 3

# First match wins: an item under aten::_safe_softmax is the guard, not the mask, though both use where.
CAUSES: tuple[Cause, ...] = (
    Cause("safe_softmax_guard", r"^aten::", r"^aten::_safe_softmax$", "",
          "safe-softmax guard: fully masked rows set to 0 instead of NaN (isneginf, all, where)",
          "a fused backend (flash, efficient, cuDNN) has no guard kernels; or accept it as the price of NaN safety",
          "aten::_safe_softmax > aten::isneginf",
          "blog: 'The safe softmax' (Figure 13); cpu: torch 2.13 math backend", item_not=r"^aten::_?softmax$"),
    Cause("hidden_copy", r"^aten::(clone|copy_|empty_like)$|^Memcpy DtoD", r"^aten::(masked_fill|index_put|index_fill|scatter|"
          r"masked_scatter)$", "",
          "hidden copy from an out-of-place op: it copies the scores before writing into them",
          "the in-place twin (masked_fill_) under torch.no_grad, or a fused backend that never materialises the scores",
          "aten::masked_fill > aten::clone > aten::copy_",
          "blog: 'Naive attention' (the hidden Memcpy, Figures 3, 6, 7); cpu: torch 2.13 masked_fill"),
    Cause("buffer_fill", r"", r"^aten::(zeros|zero_|fill_|full)$", "",
          "a buffer zeroed inside the fused op before its kernel (aten::zeros > aten::zero_ > aten::fill_)",
          "none needed: part of the backend (one small fill kernel per call)",
          "aten::_flash_attention_forward > aten::zeros > aten::zero_ > aten::fill_",
          "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (CLIPAttention, SDPA flash on ROCm)", within=FUSED_OP),
    # A position bias (or mask) computed from integer position indices in the layer, after the scores exist:
    # judged by the inputs' dtypes and shapes, as no module frame of the helper is kept (T5's compute_bias).
    Cause("mask_built_per_call", r"", r"", r"^aten::_safe_softmax$|" + FUSED_OP, MASK_WHAT,
          "build the bias (or mask) once outside the layer and pass it in (T5 passes layer 0's position_bias on)",
          "aten::sub",
          "source: huggingface/transformers models/t5/modeling_t5.py T5Attention.forward (scores = matmul(q, k^T), "
          "then position_bias = compute_bias(...): two torch.arange(dtype=torch.long), their difference, "
          "_relative_position_bucket's (x > 0).to(long) * n, abs, < max_exact, .float() / max_exact, log, div, mul, "
          ".to(long), full_like, min, where, +=; then the nn.Embedding gather); trace: "
          "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (T5Attention_0: 22 kernels, [512, 512] long int inputs)",
          index_operands=True),
    Cause("mask_built_per_call", r"", r"^aten::(ones|zeros|full|tril|triu|arange|ones_like|zeros_like|full_like|"
          r"logical_not|scalar_tensor)$", r"^aten::_safe_softmax$|" + FUSED_OP,
          MASK_WHAT,
          "pass is_causal=True to a fused backend (flash, efficient, cuDNN), or build the mask once outside the layer",
          "aten::_scaled_dot_product_attention_math > aten::ones > aten::fill_",
          "blog: 'Causal masks built' (Figure 12); source: attention.cpp (is_causal: at::ones(...).tril(), convert_boolean_attn_mask)"),
    Cause("mask_built_per_call", r"^aten::(ones|zeros|full|tril|triu|arange|logical_not)$|triu_tril_kernel", r"", FUSED_OP,
          MASK_WHAT,
          "pass is_causal=True to a fused backend (flash, efficient, cuDNN), or build the mask once outside the layer",
          "aten::_scaled_dot_product_attention_math > aten::tril",
          "blog: 'Causal masks built' (Figure 12)"),
    Cause("mask_built_per_call", r"^aten::(where|scalar_tensor|fill_)$|where|fill",
          r"^aten::(_scaled_dot_product_attention_math|scaled_dot_product_attention)$",
          r"^aten::_safe_softmax$",
          MASK_WHAT,
          "pass is_causal=True to a fused backend (flash, efficient, cuDNN), or build the mask once outside the layer",
          "aten::_scaled_dot_product_attention_math > aten::where > aten::scalar_tensor",
          "blog: 'Causal masks built' (Figure 12: scalar_tensor -> fill_, where); source: attention.cpp convert_boolean_attn_mask"),
    Cause("dtype_cast", r"", r"^aten::(_to_copy|_to_dtype|type_as)$", "",
          "dtype cast inside the math backend (to float32 and back: it upcasts bf16/fp16 on CUDA)",
          "a fused backend keeps bf16/fp16 on tensor cores; for math, torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True); "
          "or cast once outside the layer",
          "aten::to > aten::_to_copy > aten::copy_",
          "blog: 'Tensor cores left vacant' (math upcasts to FP32); source: attention.cpp _scaled_dot_product_attention_math "
          "(query_.to(at::kFloat) for half/bf16 unless allowFP16BF16ReductionMathSDP)",
          within=r"^aten::_scaled_dot_product_attention_math"),
    # The same cast anywhere else: the cast is the evidence, no backend is blamed (eager softmax(x.float()),
    # a float mask cast to bool).
    Cause("dtype_cast", r"", r"^aten::(_to_copy|_to_dtype|type_as)$", "",
          "dtype cast inside the call (aten::to / _to_copy: a tensor converted to another dtype in every call, "
          "e.g. softmax(scores.float()) or a mask cast to bool)",
          "keep one dtype through the attention (softmax(..., dtype=torch.float32) fuses the upcast into the softmax), "
          "or cast the mask once outside the layer",
          "aten::to > aten::_to_copy > aten::copy_",
          "source: HF transformers eager attention (softmax(attn_weights, dim=-1, dtype=torch.float32)); "
          "cpu: torch 2.13 aten::to > aten::_to_copy > aten::copy_"),
    # nn.MultiheadAttention's fast path (aten::_native_multi_head_attention): its own helper, and the weights
    # it returns when need_weights=True (the default): a sum over heads and a division (average_attn_weights).
    Cause("mha_fast_path", r"^aten::_transform_bias_rescale_qkv$", r"^aten::_native_multi_head_attention$", "",
          "the MHA fast path's packed q/k/v bias add and q scaling (_transform_bias_rescale_qkv: one op per call)",
          "none needed: part of nn.MultiheadAttention's fast path",
          "aten::_native_multi_head_attention > aten::_transform_bias_rescale_qkv",
          "source: pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp native_multi_head_attention; "
          "cpu: torch 2.13 nn.MultiheadAttention(batch_first=True).eval() under no_grad"),
    Cause("attention_weights", r"^aten::(sum|div_|fill_)$", r"^aten::_native_multi_head_attention$", "",
          "the attention weights averaged over heads and returned (need_weights=True, nn.MultiheadAttention's "
          "default; average_attn_weights=True): a sum and a division per call",
          "pass need_weights=False when the weights are not used: the averaging goes, and the layer can run a "
          "fused SDPA kernel instead of bmm, softmax, bmm",
          "aten::_native_multi_head_attention > aten::sum > aten::fill_",
          "source: pytorch/pytorch aten/src/ATen/native/transformers/attention.cpp native_multi_head_attention "
          "(need_weights: qkt.sum(1) / num_head when average_attn_weights); torch/nn/modules/activation.py "
          "MultiheadAttention.forward (need_weights defaults to True); cpu: torch 2.13"),
    Cause("layout_copy", r"", r"^aten::(contiguous|reshape|clone|flatten|_reshape_copy|repeat_interleave|expand_as)$", "",
          "layout copy: a non-contiguous tensor (after transpose/permute) copied into a new layout",
          "keep the layout the next op wants (e.g. [B, H, S, D] for SDPA), or let a fused backend take the strides",
          "aten::reshape > aten::clone > aten::copy_",
          "source: PyTorch reshape/contiguous copy when the strides do not allow a view; blog 'No transposes'"),
)

# Ops that never start a kernel: views, allocations, and the no-op cast (its copy, when there is one,
# is its child _to_copy > copy_). On a CPU trace, an op does work when it is none of these and no
# op below it does work ("kernels" there are these work ops).
WORK_FREE_OPS = frozenset({
    "aten::view", "aten::_unsafe_view", "aten::_reshape_alias", "aten::reshape", "aten::as_strided", "aten::expand",
    "aten::expand_as", "aten::transpose", "aten::permute", "aten::t", "aten::unsqueeze", "aten::squeeze",
    "aten::slice", "aten::select", "aten::split", "aten::chunk", "aten::unbind", "aten::narrow", "aten::alias",
    "aten::detach", "aten::detach_", "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg",
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::contiguous", "aten::to", "aten::result_type",
    "aten::view_as", "aten::flatten", "aten::unflatten", "aten::matmul", "aten::linear",
})
# Source of WORK_FREE_OPS: pytorch/pytorch aten/src/ATen/native/native_functions.yaml (view and factory
# ops; matmul/linear dispatch to bmm/mm/addmm, which do the work). Example (cpu): aten::matmul >
# aten::expand, aten::reshape > aten::view, aten::bmm.

# An aten::to directly under an elementwise op with a Python number is the number's conversion on
# the host (a 0-dim wrapped scalar): no kernel on a GPU. Example (cpu): aten::mul > aten::to >
# aten::_to_copy > aten::copy_ for scores * 0.125.
HOST_SCALAR_PARENTS = compile_linear(r"^aten::(mul|div|add|sub|rsub|mul_|div_|add_|sub_|masked_fill|masked_fill_|where|"
                                 r"pow|clamp|fill_)$")

# Repeated steps: more kernels for one step than expected, explained per implementation.
REPEATED_STEP = {
    ("math", "scale"): ("the math backend scales q and k separately (by the square root of the scale each, for stability)",
                        "a fused backend scales inside its kernel",
                        "source: attention.cpp _scaled_dot_product_attention_math (query * sqrt(scale), key.transpose * sqrt(scale))"),
}
REPEATED_DEFAULT = ("this step ran as several kernels", "a fused backend runs the whole call as one kernel",
                    "blog: 'every backend ... is trying to collapse the 20 GPU kernels into essentially one fused kernel'")

# FP32 GEMM on CUDA cores (no tensor cores) while the call's inputs are bf16/fp16.
FP32_GEMM = compile_linear(r"sgemm")  # e.g. ampere_sgemm_128x64_nn (blog Figure 11: sgemm, not the s16816 bf16 GEMM)
FP32_GEMM_EXAMPLES = ("ampere_sgemm_128x64_nn", "volta_sgemm_128x64_tn")  # source: cuBLAS kernel names in PyTorch profiles
# A call's dtype (as shapes.py records it, e.g. "c10::BFloat16", "bfloat16") is 16-bit when its lower case holds one of these.
LOW_PRECISION = ("bfloat16", "bf16", "float16", "half", "fp16")
TRANSPOSE_OP = "aten::transpose"
