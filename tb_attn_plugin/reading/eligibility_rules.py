"""PyTorch's SDPA backend eligibility checks as data: per fused CUDA backend, the checks it runs, in its order,
each with the function's name, its source file, what refusal means and the one-line fix.

Read from pytorch/pytorch main @001f694 (the torch 2.13 line): on the CPU ``use_flash_attention_cpp`` in
aten/src/ATen/native/transformers/sdp_utils_cpp.cpp (CPU_CHECKS); on CUDA ``can_use_flash_attention``,
``can_use_mem_efficient_attention`` and ``can_use_cudnn_attention`` in
aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, the shared checks in
aten/src/ATen/native/transformers/sdp_utils_cpp.h. The predicate of each row lives in why_not_flash.py
under the row's ``check`` name; a check the trace cannot answer (runtime switches; strides or requires_grad when
not recorded)
is reported as unknown, never as passed. The runtime switches are answered from the collector's call tag (``sdp``:
the backends sdpa_kernel left enabled at the call).
"""

from __future__ import annotations

import msgspec


TORCH_SOURCE = "pytorch/pytorch main @001f694 (torch 2.13)"
CUDA_FILE = "aten/src/ATen/native/transformers/cuda/sdp_utils.cpp"
CPP_FILE = "aten/src/ATen/native/transformers/sdp_utils_cpp.h"
CPU_FILE = "aten/src/ATen/native/transformers/sdp_utils_cpp.cpp"


class Check(msgspec.Struct, frozen=True):
    backend: str  # flash | efficient | cudnn
    check: str  # PyTorch's function name (the predicate's key in why_not_flash.py)
    source: str
    reason: str  # why it refuses, with {placeholders} filled from the inputs
    fix: str


# In PyTorch's order within each backend (the first refusal is the one PyTorch prints with debug=True).
CHECKS: tuple[Check, ...] = (
    Check("flash", "check_runtime_disabled_flash", CPP_FILE, "flash was switched off at the call: {pinned}",
          "leave SDPBackend.FLASH_ATTENTION enabled"),
    Check("flash", "check_tensor_shapes", CPP_FILE, "query, key and value are not all 4-D ({ndims})",
          "reshape to (batch, heads, seq_len, head_dim)"),
    Check("flash", "check_for_attn_mask", CPP_FILE, "an explicit attn_mask ({mask}) is passed; flash takes none",
          "pass is_causal=True instead of a dense causal mask, or drop the mask (efficient and cuDNN take one)"),
    Check("flash", "check_head_dim_size_flash", CUDA_FILE,
          "head dims differ or exceed 256 (q {dq}, k {dk}, v {dv})", "use head_dim <= 256, the same for q, k and v"),
    Check("flash", "check_flash_attention_hardware_support", CUDA_FILE, "the device is {arch}; flash needs sm80 to sm121",
          "run on an sm80+ GPU (A100, H100, ...), or use the efficient backend"),
    Check("flash", "check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120", CUDA_FILE,
          "training with head_dim {dq} on {arch} (sm86-89, sm120-121 refuse 192 < d <= 224, and d > 224 with dropout)",
          "use head_dim <= 192 for training on this GPU"),
    Check("flash", "check_flash_causal_non_square_seqlens", CUDA_FILE,
          "is_causal with q_len {lq} != k_len {lk} (flash's causal mask is bottom-right aligned)",
          "use torch.nn.attention.bias.causal_lower_right, or square q/k lengths"),
    Check("flash", "check_dtypes_flash_attention", CUDA_FILE, "dtype {dtype}; flash takes {allowed}",
          "cast q, k, v to bfloat16 (or float16), e.g. under torch.autocast"),
    Check("flash", "check_batch_size_and_num_heads_dense", CPP_FILE,
          "q has {hq} heads and k/v {hkv}{gqa}", "pass enable_gqa=True (q heads a multiple of kv heads), or "
          "repeat_interleave K/V to q's heads"),
    Check("flash", "check_nonzero_sequence_lengths_dense", CPP_FILE, "a zero-length sequence (q {lq}, k {lk})",
          "skip empty batches before attention"),
    Check("flash", "check_last_dim_stride_equals_1_dense", CPP_FILE,
          "the last dimension of q, k, v or the mask is not contiguous (stride(-1): {strides})",
          "call .contiguous() on the projections (or transpose before, not after, the view)"),

    Check("efficient", "check_runtime_disabled_mem_efficient", CPP_FILE,
          "efficient attention was switched off at the call: {pinned}",
          "leave SDPBackend.EFFICIENT_ATTENTION enabled"),
    Check("efficient", "check_mem_efficient_hardware_support", CUDA_FILE, "the device is {arch}; efficient needs sm50 to sm121",
          "run on a newer GPU"),
    Check("efficient", "check_tensor_shapes", CPP_FILE, "query, key and value are not all 4-D ({ndims})",
          "reshape to (batch, heads, seq_len, head_dim)"),
    Check("efficient", "check_head_dim_size_mem_efficient", CUDA_FILE,
          "head dim {dq} (v {dv}) is not a multiple of {align} for {dtype}", "pad head_dim to a multiple of {align}"),
    Check("efficient", "check_batch_size_and_num_heads_dense", CPP_FILE, "q has {hq} heads and k/v {hkv}{gqa}",
          "pass enable_gqa=True (q heads a multiple of kv heads), or repeat_interleave K/V to q's heads"),
    Check("efficient", "check_nonzero_sequence_lengths_dense", CPP_FILE, "a zero-length sequence (q {lq}, k {lk})",
          "skip empty batches before attention"),
    Check("efficient", "check_last_dim_stride_equals_1_dense", CPP_FILE,
          "the last dimension of q, k, v or the mask is not contiguous (stride(-1): {strides})",
          "call .contiguous() on the projections"),
    Check("efficient", "check_tensor_dtype", CUDA_FILE, "dtype {dtype}; efficient takes {allowed}",
          "cast q, k, v to bfloat16, float16 or float32"),

    Check("cudnn", "USE_ROCM", CUDA_FILE, "a ROCm build has no cuDNN attention (can_use_cudnn_attention returns false)",
          "on AMD GPUs use the flash or efficient backend (AOTriton / CK)"),
    Check("cudnn", "check_runtime_disabled_cudnn", CUDA_FILE, "cuDNN attention was switched off at the call: {pinned}",
          "leave SDPBackend.CUDNN_ATTENTION enabled"),
    Check("cudnn", "check_tensor_shapes", CPP_FILE, "query, key and value are not all 4-D ({ndims})",
          "reshape to (batch, heads, seq_len, head_dim)"),
    Check("cudnn", "check_dtypes_low_precision", CUDA_FILE, "dtype {dtype}; cuDNN takes {allowed}",
          "cast q, k, v to bfloat16 or float16 (torch.autocast)"),
    Check("cudnn", "check_attn_mask_shape", CPP_FILE, "the mask's shape {mask_dims} is not 2-D (Lq|1, Lk|1) or "
          "4-D (B|1, H|1, Lq|1, Lk|1)", "broadcast the mask to one of those shapes"),
    Check("cudnn", "check_cudnn_hardware_support", CUDA_FILE, "the device is {arch}; cuDNN SDPA needs sm80 to sm121",
          "run on an sm80+ GPU"),
    Check("cudnn", "check_cudnn_dropout", CUDA_FILE, "dropout {dropout} is not a multiple of 1/16",
          "use a dropout probability that is a multiple of 1/16 (0.0625)"),
    Check("cudnn", "check_last_dim_stride_equals_1_dense", CPP_FILE,
          "the last dimension of q, k, v or the mask is not contiguous (stride(-1): {strides})",
          "call .contiguous() on the projections"),
    Check("cudnn", "check_cudnn_tensor_shapes", CUDA_FILE, "{cudnn_shape}",
          "head_dim a multiple of 8 and <= 128 (256 on sm90/sm10x with cuDNN > 9.22); k_len > 1"),
    Check("cudnn", "check_batch_size_and_num_heads_dense", CPP_FILE, "q has {hq} heads and k/v {hkv} (not a multiple)",
          "make q's heads a multiple of k/v's heads"),
)

BACKENDS = ("flash", "efficient", "cudnn")

# The CPU's SDPA: use_flash_attention_cpp in CPU_FILE, in its order (check_tensor_dtype last); the CPU has the
# flash kernel (aten::_scaled_dot_product_flash_attention_for_cpu) and math only: no efficient or cuDNN kernel.
CPU_CHECKS: tuple[Check, ...] = (
    Check("flash_cpu", "check_runtime_disabled_flash", CPP_FILE,
          "flash was switched off at the call: {pinned}", "leave SDPBackend.FLASH_ATTENTION enabled"),
    Check("flash_cpu", "check_nested_tensor", CPP_FILE, "a nested tensor input", "pass dense (padded) tensors"),
    Check("flash_cpu", "check_for_dropout", CPP_FILE, "dropout_p {dropout} > 0; the CPU flash kernel takes no dropout",
          "pass dropout_p=0.0 (e.g. dropout_p=p if self.training else 0.0, and model.eval() for inference)"),
    Check("flash_cpu", "check_tensor_shapes", CPP_FILE, "query, key and value are not all 4-D ({ndims})",
          "reshape to (batch, heads, seq_len, head_dim)"),
    Check("flash_cpu", "check_batch_size_and_num_heads_dense", CPP_FILE, "q has {hq} heads and k/v {hkv}{gqa}",
          "pass enable_gqa=True (q heads a multiple of kv heads), or repeat_interleave K/V to q's heads"),
    Check("flash_cpu", "check_attn_mask_shape", CPP_FILE, "the mask's shape {mask_dims} is not 2-D (Lq|1, Lk|1) or "
          "4-D (B|1, H|1, Lq|1, Lk|1)", "broadcast the mask to one of those shapes"),
    Check("flash_cpu", "check_head_dim_size_cpp", CPU_FILE, "head dims differ (q {dq}, k {dk}, v {dv})",
          "use the same head_dim for q, k and v"),
    Check("flash_cpu", "check_nonzero_sequence_lengths_dense", CPP_FILE, "a zero-length sequence (q {lq}, k {lk})",
          "skip empty batches before attention"),
    Check("flash_cpu", "check_last_dim_stride_equals_1_dense", CPP_FILE,
          "the last dimension of q, k, v or the mask is not contiguous (stride(-1): {strides})",
          "call .contiguous() on the projections"),
    Check("flash_cpu", "check_tensor_dtype", CPU_FILE, "dtype {dtype}; the CPU flash kernel takes {allowed}",
          "use float32, float64, bfloat16 or float16 inputs"),
)
CPU_BACKENDS = ("flash_cpu",)
NOT_RECORDED = ("the sdpa_kernel / enable_*_sdp switches are not recorded (the collector, tb_attn_plugin.profile, "
                "records them per call in its tag's sdp field)")
# The checks a trace cannot answer without the collector's tag: runtime switches and the state PyTorch reads at call time.
UNANSWERABLE = {
    "check_runtime_disabled_flash": NOT_RECORDED,
    "check_runtime_disabled_mem_efficient": NOT_RECORDED,
    "check_runtime_disabled_cudnn": NOT_RECORDED,
}
# CPU_FILE's rows read at the same commit as the CUDA rows (TORCH_SOURCE).
