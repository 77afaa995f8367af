"""The six attention variants of "Profiling in PyTorch (Part 3): Attention is all you profile"
(huggingface/blog torch-attention-profile.md), profiled as its scripts profile them: q, k, v of shape
[batch, heads, seq, head_dim], one attention module, forward only under torch.no_grad.

    naive           matmul, mul, out-of-place masked_fill (mask built once), softmax, matmul
    naive-inplace   the same with masked_fill_
    sdpa-math, sdpa-efficient, sdpa-flash, sdpa-cudnn   F.scaled_dot_product_attention(is_causal=True) pinned
    sdpa            unpinned SDPA: on the CPU, its fused path (the CPU has no efficient or cuDNN kernel)
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

import tb_attn_plugin

from .models import FORCED

HEADS, HEAD_DIM = 8, 64
CPU_VARIANTS = ("naive", "naive-inplace", "sdpa-math", "sdpa")
CUDA_VARIANTS = ("naive", "naive-inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn")


class NaiveCausalAttention(nn.Module):
    """The post's hand-written attention; ``inplace`` swaps masked_fill for masked_fill_."""

    def __init__(self, inplace: bool):
        super().__init__()
        self.scale, self.inplace = 1.0 / math.sqrt(HEAD_DIM), inplace

    def forward(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = scores * self.scale
        if self.inplace:
            scores.masked_fill_(mask, float("-inf"))  # safe here: no autograd under no_grad
        else:
            scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


class SdpaAttention(nn.Module):
    """F.scaled_dot_product_attention with is_causal, pinned to one backend unless ``backend`` is None."""

    def __init__(self, backend):
        super().__init__()
        self.backend = backend

    def forward(self, q, k, v, mask):
        if self.backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with sdpa_kernel(self.backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def module(variant: str) -> nn.Module:
    if variant in ("naive", "naive-inplace"):
        return NaiveCausalAttention(inplace=variant == "naive-inplace")
    if variant == "sdpa":
        return SdpaAttention(None)
    return SdpaAttention(FORCED[variant])


def profile_variant(variant: str, length: int, logdir: str, *, device: str = "cpu", dtype=torch.float32,
                    batch: int = 1, steps: int = 1) -> str:
    """Profile ``steps`` forwards (after one warm-up) into ``{logdir}/post-{variant}-L{length}``."""
    torch.manual_seed(0)
    m = module(variant)
    q, k, v = (torch.randn(batch, HEADS, length, HEAD_DIM, device=device, dtype=dtype) for _ in range(3))
    mask = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)  # built once, as in the post
    run = os.path.join(logdir, f"post-{variant}-L{length}")
    sched = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.no_grad(), tb_attn_plugin.profile(run, model=m, variant=f"post-{variant}", schedule=sched,
                                                 measure_peaks=False, extra={"seq_len": length, "batch": batch,
                                                                             "post": True}) as prof:
        for _ in range(1 + steps):
            m(q, k, v, mask)
            prof.step()
    r = prof.reports[-1] if prof.reports else None
    return f"{run}: {r['calls']} calls" if r else f"{run}: no report"
