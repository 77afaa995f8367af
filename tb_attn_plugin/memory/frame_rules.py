"""What a snapshot's stack frames say: attention functions, the op that allocated, autograd nodes (a table of rules).

torch records a Python frame as ``{filename, line, name}`` with ``name`` the code object's
``co_name`` (torch/csrc/profiler/python/combined_traceback.cpp): a method is ``forward``, not
``CausalSelfAttention.forward``. A module's forward is therefore recognised by name only where a
frame carries the qualified name; otherwise by the attention functions it calls (transformers',
torch's ``multi_head_attention_forward``, a user's ``scaled_dot_product_attention``) or, in C++
stacks (``stacks="all"``), by the ATen op (``at::_ops::scaled_dot_product_attention::call``).
Stacks are innermost first, as ``_memory_viz.py`` reads them.

Names are evidence, not a requirement: a function no row names is still found by what it
allocates (memory/structure.py).

Each row: kind, what it matches (a regular expression on the frame's function name, searched,
case-insensitive; ``file``: one on its filename), the value it gives, a real example and its source.
The first row that matches a frame wins.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from ..format.linear_regex import compile_linear

# kind "not_attention": functions whose name says attention but that only build its inputs.
# kind "attention": the frame is inside an attention call (value: its implementation word).
# kind "op": the ATen op or torch Python function that allocated (value: the op's class).
# kind "release": a node releasing its saved tensors (frees).
# kind "backward": a frame under which everything runs in the backward (a compiled backward).
# kind "node": an autograd backward node (value: the forward op class it differentiates;
#              "attention" where the node is attention itself).
# An ATen op in a C++ frame is at::_ops::<op>[_<overload>]::call (mul_Tensor, softmax_int, to_dtype,
# masked_fill_Scalar: aten/src/ATen/Operators.h); a Python frame is the bare function name.
OVERLOAD = r"(_[A-Za-z]\w*?)?(::|$)"

RULES: list[dict] = [
    {"kind": "not_attention", "name": r"attention_mask|attn_mask|causal_mask", "value": "mask prep",
     "example": "_prepare_4d_causal_attention_mask", "source": "transformers/modeling_attn_mask_utils.py"},
    # Python functions whose name says attention.
    {"kind": "attention", "name": r"^scaled_dot_product_attention$", "value": "function",
     "example": "scaled_dot_product_attention (a user's hand-written function, or torch's in a C++ frame)",
     "source": "torch/nn/functional.py (torch._C._nn.scaled_dot_product_attention)"},
    {"kind": "attention", "name": r"^\w*_attention_forward$", "value": "library",
     "example": "eager_attention_forward / sdpa_attention_forward / flash_attention_forward",
     "source": "transformers/models/llama/modeling_llama.py; transformers/integrations/sdpa_attention.py, "
               "flash_attention.py"},
    {"kind": "attention", "name": r"^multi_head_attention_forward$", "value": "nn.MultiheadAttention",
     "example": "multi_head_attention_forward", "source": "torch/nn/functional.py"},
    {"kind": "attention", "name": r"^get_attention_scores$", "value": "diffusers",
     "example": "Attention.get_attention_scores", "source": "diffusers/models/attention_processor.py"},
    {"kind": "attention", "name": r"^_?(upcast_and_reordered_)?attn$", "value": "library",
     "example": "GPT2Attention._attn / _upcast_and_reordered_attn",
     "source": "transformers/models/gpt2/modeling_gpt2.py (before 4.48)"},
    {"kind": "attention", "name": r"^repeat_kv$", "value": "GQA",
     "example": "repeat_kv (K/V heads repeated to Q's: GQA/MQA)", "source": "transformers/models/llama/modeling_llama.py"},
    # Files that hold only attention code: any function in them.
    {"kind": "attention", "file": r"diffusers/models/attention_processor\.py$", "value": "diffusers",
     "example": "AttnProcessor2_0.__call__", "source": "diffusers/models/attention_processor.py"},
    {"kind": "attention", "file": r"flash_attn(_3)?/flash_attn_interface\.py$|hopper/flash_attn_interface\.py$",
     "value": "flash_attn", "example": "FlashAttnFunc.forward / backward, _flash_attn_forward",
     "source": "Dao-AILab/flash-attention flash_attn/flash_attn_interface.py"},
    {"kind": "attention", "file": r"timm/layers/attention\.py$", "value": "timm",
     "example": "Attention.forward", "source": "huggingface/pytorch-image-models timm/layers/attention.py"},
    # ATen attention ops (C++ frames; also the autograd nodes of the fused kernels).
    {"kind": "attention", "name": r"(^|::)_?scaled_dot_product_\w*attention\w*|_efficient_attention_\w+|"
                                  r"_flash_attention_\w+|_fused_sdp_choice|_native_multi_head_attention",
     "value": "aten", "example": "at::_ops::_scaled_dot_product_efficient_attention::call(...)",
     "source": "aten/src/ATen/native/native_functions.yaml"},
    # A qualified name (frames that carry one) of a module whose name says attention.
    {"kind": "attention", "name": r"(attention|attn)\w*\.(forward|__call__)$", "value": "module",
     "example": "CausalSelfAttention.forward (nanoGPT model.py) / LlamaAttention.forward / self_attn.forward",
     "source": "karpathy/nanoGPT model.py; transformers modeling_llama.py"},
    # Any other function whose own name says attention ("attention", "self_attention", "attn_fn").
    {"kind": "attention", "name": r"^[a-z_]*(attention|attn)[a-z_0-9]*$", "value": "function",
     "example": "attention / self_attention / attn_fn (user functions)", "source": "naming convention"},
    # A node freeing the tensors it saved in the forward, on a free entry's stack: links the node's
    # run to the forward block it frees (memory/stack_attribution.py).
    {"kind": "release", "name": r"Backward\w*::release_variables$", "value": "release",
     "example": "torch::autograd::generated::DivBackward0::release_variables()",
     "source": "torch/csrc/autograd/generated/Functions.h; free entries of a stacks=\"all\" snapshot"},
    # Autograd nodes (C++ frames ``torch::autograd::generated::SoftmaxBackward0::apply``).
    {"kind": "node", "name": r"ScaledDotProduct\w*AttentionBackward\d*|\w*(Attn|Attention)\w*Backward\w*",
     "value": "attention", "example": "ScaledDotProductEfficientAttentionBackward0",
     "source": "torch/csrc/autograd/generated/Functions.h"},
    {"kind": "node", "name": r"\b_?SoftmaxBackward(Data)?\d*", "value": "softmax", "example": "SoftmaxBackward0",
     "source": "torch/csrc/autograd/generated/Functions.h (derivatives.yaml: _softmax)"},
    {"kind": "node", "name": r"\bBmmBackward\d*|\bBaddbmmBackward\d*|\bMatmulBackward\d*|\bEinsumBackward\d*",
     "value": "matmul", "example": "BmmBackward0", "source": "torch/csrc/autograd/generated/Functions.h"},
    {"kind": "node", "name": r"\bMaskedFillBackward\d*|\bWhereBackward\d*", "value": "mask",
     "example": "MaskedFillBackward0", "source": "torch/csrc/autograd/generated/Functions.h"},
    {"kind": "node", "name": r"\b(Mul|Div)Backward\d*", "value": "scale", "example": "MulBackward0",
     "source": "torch/csrc/autograd/generated/Functions.h"},
    {"kind": "node", "name": r"\bNativeDropoutBackward\d*", "value": "dropout", "example": "NativeDropoutBackward0",
     "source": "torch/csrc/autograd/generated/Functions.h"},
    {"kind": "node", "name": r"\w+Backward\d+\b", "value": "other", "example": "AddmmBackward0",
     "source": "torch/csrc/autograd/generated/Functions.h"},
    # Ops: C++ ``at::_ops::<op>::call`` / ``at::native::<op>``, torch's Python functions and modules.
    {"kind": "op", "name": r"(^|::)(bmm|baddbmm|matmul|einsum|mm)" + OVERLOAD, "value": "matmul",
     "example": "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"^einsum$", "value": "matmul", "example": "einsum", "source": "torch/functional.py"},
    # A log-softmax is the loss's, never attention's probabilities (listed before softmax: first match wins).
    {"kind": "op", "name": r"(^|::)_?log_softmax" + OVERLOAD, "value": "log_softmax",
     "example": "at::_ops::_log_softmax::call / log_softmax (torch/nn/functional.py, inside cross_entropy)",
     "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)_?(safe_)?softmax" + OVERLOAD, "value": "softmax",
     "example": "at::_ops::_softmax::call / softmax (torch/nn/functional.py)", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)(masked_fill_?|where|tril_?|triu_?)" + OVERLOAD, "value": "mask",
     "example": "at::_ops::masked_fill_Scalar::call", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)(mul|div)" + OVERLOAD, "value": "scale",
     "example": "at::_ops::mul_Tensor::call", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)(native_)?dropout" + OVERLOAD, "value": "dropout",
     "example": "at::_ops::native_dropout::call / dropout (torch/nn/functional.py)",
     "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)(linear|addmm)" + OVERLOAD, "value": "linear",
     "example": "at::_ops::linear::call / at::_ops::addmm::call", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "file": r"torch/nn/modules/linear\.py$", "value": "linear", "example": "Linear.forward",
     "source": "torch/nn/modules/linear.py"},
    {"kind": "op", "name": r"(^|::)repeat_interleave" + OVERLOAD, "value": "repeat",
     "example": "at::_ops::repeat_interleave_self_int::call (K/V heads repeated to Q's: GQA/MQA)",
     "source": "aten/src/ATen/Operators.h; torch.Tensor.repeat_interleave"},
    {"kind": "op", "name": r"(^|::)(clone|contiguous|copy_|_unsafe_view|reshape|_reshape_alias|expand|"
                           r"to|_to_copy|cat|index_select)" + OVERLOAD, "value": "copy",
     "example": "at::_ops::clone::call", "source": "aten/src/ATen/Operators.h"},
    # A softmax written out (x - max, exp, / sum), as course and research code writes it.
    {"kind": "op", "name": r"(^|::)exp_?" + OVERLOAD, "value": "exp",
     "example": "at::_ops::exp::call (torch.exp in a hand-written softmax)", "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)(amax|max|sum|logsumexp)" + OVERLOAD, "value": "reduce",
     "example": "at::_ops::amax::call / at::_ops::max_dim::call / at::_ops::sum_dim_IntList::call",
     "source": "aten/src/ATen/Operators.h"},
    {"kind": "op", "name": r"(^|::)sub" + OVERLOAD, "value": "sub",
     "example": "at::_ops::sub_Tensor::call (x - x.max(-1).values)", "source": "aten/src/ATen/Operators.h"},
    # Any other ATen op: the allocation's op is known, and none of the above (an add, a gelu, ...).
    {"kind": "op", "name": r"^at::_ops::\w+::call$", "value": "aten",
     "example": "at::_ops::add_Tensor::call", "source": "aten/src/ATen/Operators.h"},
    # A compiled (torch.compile / AOTAutograd) backward: Inductor's code runs under these frames,
    # whatever forward source lines the frames above it carry.
    {"kind": "backward", "name": r"^_backward_impl$|^_backward_prologue$|^_backward_epilogue\w*$",
     "file": r"torch/_functorch/", "value": "compiled",
     "example": "CompiledFunction._backward_impl (runtime_wrappers.py)",
     "source": "pytorch/pytorch torch/_functorch/_aot_autograd/runtime_wrappers.py"},
]

ATTENTION, OP, NODE, NOT_ATTENTION, RELEASE, BACKWARD = "attention", "op", "node", "not_attention", "release", "backward"
# Op classes that are not the op's meaning: "aten" (an op no row names) says only that the op is known.
GENERIC_OPS = ("aten",)
NODE_NAME = compile_linear(r"(\w+Backwards?\d*)(::apply|::release_variables|_apply_functional)")


def node_name(name: str) -> str | None:
    """The autograd node a C++ frame names (``SoftmaxBackward0``), or None."""
    m = NODE_NAME.search(name)
    return m.group(1) if m else None
SHOWN, KEPT, PYTHON = 1, 2, 4  # bits the snapshot decoder takes (memory/_snapshot_decode.c)
# Frames a report does not show as a block's location: torch's own Python and C++ frames.
TORCH_FILES = compile_linear(r"/torch/|/site-packages/torch|^<frozen |^\?\?|^$")
PYTHON_FILE = compile_linear(r"\.py$|^<(stdin|string|ipython-input)[^>]*>$|^/tmp/torchinductor")


class Rule(msgspec.Struct, frozen=True):
    kind: str
    value: str
    name: Any | None  # RE2 programs (format/linear_regex.py)
    file: Any | None


@lru_cache(maxsize=1)
def _compiled() -> list[Rule]:
    """The rules compiled on first use: only a snapshot's frames need them (a few ms at every start else)."""
    return [Rule(r["kind"], r["value"], compile_linear(r["name"], ignore_case=True) if "name" in r else None,
                 compile_linear(r["file"]) if "file" in r else None) for r in RULES]


def function_name(name: str) -> str:
    """A C++ symbol without its argument list; a Python name as it is."""
    cut = name.find("(")
    return name[:cut] if cut > 0 else name


@lru_cache(maxsize=1 << 16)
def match(filename: str, name: str) -> tuple[str, str] | None:
    """(kind, value) of the first rule a frame matches, or None."""
    fn = function_name(name)
    for r in _compiled():
        if r.file is not None and not r.file.search(filename):
            continue
        if r.name is not None and not r.name.search(fn):
            continue
        return r.kind, r.value
    return None


def is_user_frame(filename: str) -> bool:
    """A Python frame of the user's code: not torch's, not C++."""
    return bool(PYTHON_FILE.search(filename)) and not TORCH_FILES.search(filename)


def frame_bits(filename, name) -> int:
    """The decoder's bits for one distinct frame: SHOWN for user Python code, KEPT when a rule matches,
    PYTHON for a Python frame (kept too: attention is also found by what a function allocates,
    memory/structure.py, which needs the frames that enclose an allocation)."""
    if not isinstance(filename, str):
        return 0
    nm = name if isinstance(name, str) else ""
    return ((SHOWN if is_user_frame(filename) else 0) | (KEPT if match(filename, nm) is not None else 0) |
            (PYTHON if PYTHON_FILE.search(filename) else 0))
