"""Under a fused attention op, fills and copies are `other`; every other kernel is the fused stage."""

from __future__ import annotations

import re

import pytest

from tb_attn_plugin.attention.helper_kernels import HELPER_KERNELS, helper_kind
from tb_attn_plugin.attention.stages import kernel_stage


@pytest.mark.parametrize("row", HELPER_KERNELS, ids=lambda r: r[0])
def test_each_row_matches_its_example(row):
    name, pattern, example, source = row
    assert re.search(pattern, example) and helper_kind(example) == name and source


@pytest.mark.parametrize("kernel,stage", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "other"),
    ("Memset (Device)", "other"),
    ("attn_fwd", "fused"),  # a known fused family
    ("my_new_backend_attention_kernel_v9<128, bf16>", "fused"),  # a kernel nobody named yet
    ("void flash_fwd_sm200_kernel_renamed(Params)", "fused"),
])
def test_kernels_under_a_fused_op(kernel, stage):
    assert kernel_stage("fused", kernel) == stage


def test_outside_a_fused_op_nothing_changes():
    assert kernel_stage("softmax", "my_new_backend_attention_kernel_v9") == "softmax"
    assert kernel_stage("qk_matmul", "attn_fwd") == "fused"  # a fused kernel is fused wherever it runs
