"""Attention FLOPs by the FlashAttention benchmarks' convention (no torch).

Forward: 4·B·H·Lq·Lk·D (two matmuls, QKᵀ and AV, of 2·Lq·Lk·D each per head), halved when causal;
backward 2.5× forward, forward+backward 3.5×. Softmax and masking are not counted (PyTorch's own
sweep counts 2·Lq·Lk per head for softmax too). Every number in the sweep uses this formula.
"""

from __future__ import annotations

CONVENTION = ("FlashAttention convention: 4*B*H*Lq*Lk*D forward, halved when causal; backward 2.5x forward "
              "(fwd+bwd 3.5x); softmax not counted")


def attention_flops(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, *, causal: bool = False,
                    pass_: str = "fwd") -> float:
    fwd = 4.0 * batch * heads * seq_q * seq_k * head_dim
    if causal:
        fwd /= 2
    if pass_ == "fwd":
        return fwd
    if pass_ == "bwd":
        return 2.5 * fwd
    if pass_ == "fwd+bwd":
        return 3.5 * fwd
    raise ValueError(f"unknown pass {pass_!r}")
