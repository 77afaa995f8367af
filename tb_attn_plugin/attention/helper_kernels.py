"""Kernels a fused attention op launches besides its attention kernel: fills, copies, memsets.

Under a fused op (``aten::_scaled_dot_product_*``, a vendor fmha op) these are the ``other`` stage
(copies, layout); any other kernel it launches, even one no family in patterns.py knows (a new
backend, a renamed kernel), is the fused attention itself. Data, one row per helper with a real
example and where it was seen; tests/test_helper_kernels.py checks every row against its example.
"""

from __future__ import annotations

from functools import lru_cache

from ..format.linear_regex import compile_linear

# (name, pattern, example, source)
HELPER_KERNELS: tuple[tuple[str, str, str, str], ...] = (
    ("fill", r"FillFunctor|\bfill_kernel",
     "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)",
     "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph, launched under aiter::fmha_fwd"),
    ("copy", r"direct_copy_kernel|copy_kernel|CatArrayBatchedCopy|\bcopy_device_to_device",
     "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}> >(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>)",
     "source: PyTorch aten/src/ATen/native/cuda/Copy.cu (a .contiguous() before a fused kernel)"),
    ("memset_memcpy", r"^(Memset|Memcpy)\b",
     "Memcpy DtoD (Device -> Device)",
     "source: kineto names of gpu_memcpy / gpu_memset activities"),
)
_COMPILED = tuple((name, compile_linear(pattern)) for name, pattern, _, _ in HELPER_KERNELS)


@lru_cache(maxsize=65536)
def helper_kind(kernel_name: str) -> str | None:
    """The helper row matching ``kernel_name``, or None when it is not a helper kernel."""
    return next((name for name, rx in _COMPILED if rx.search(kernel_name)), None)
