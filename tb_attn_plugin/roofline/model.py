"""FLOPs and bytes moved through device memory by one attention call, per stage and pass, by a stated model.

Notation: s = bytes per element of the call's dtype; Q = B·Hq·Lq·D and O = B·Hq·Lq·D elements;
K = V = B·Hkv·Lk·D (B·Hq·Lk·D when Hkv is unknown); E = B·Hq·Lq·Lk, the score matrix.

FLOPs: a matmul of E·D multiply-adds is 2·E·D FLOP; the fused forward is 4·E·D (halved when causal,
since fused kernels skip masked tiles); the fused backward is 2.5× its forward (FlashAttention's
convention: five matmuls with the recomputation of QKᵀ). Unfused matmuls compute every score, so
causal does not halve them. Elementwise passes count 1 FLOP per score element (softmax 5: max,
subtract, exp, sum, divide; its backward 4).

Bytes (each tensor read or written once per kernel, no cache reuse across kernels):
- unfused forward: QKᵀ reads Q, K and writes E; each elementwise pass (scale, mask, softmax,
  dropout: one pass per kernel of that stage in the call, at least one) reads E and writes E;
  AV reads E and V and writes O.
- unfused backward: AV's reads dO, V, E and writes dP (E) and dV; softmax's reads E twice (P, dP)
  and writes dS (E); each other elementwise pass reads and writes E; QKᵀ's reads dS (E twice: for
  dQ and dK), Q, K and writes dQ, dK.
- fused forward: reads Q, K, V; writes O and the fp32 log-sum-exp (4·B·Hq·Lq bytes).
- fused backward (FlashAttention-2 with recomputation): reads Q, K, V, O, dO and the log-sum-exp;
  writes dQ, dK, dV. The score matrix never reaches memory.
Stages outside the core (projections, copies, other) are not modelled.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..attention.shapes import ITEMSIZE
from ..format import tags

MODELLED_STAGES = tags.CORE_STAGES
ELEMENTWISE = {"scale_mask": (1.0, 1.0), "softmax": (5.0, 4.0), "dropout": (1.0, 1.0)}  # FLOP/element fwd, bwd
LSE_BYTES = 4  # the fp32 log-sum-exp per query row that fused kernels keep for the backward


class Sizes(msgspec.Struct, frozen=True):
    """Element counts of one call and the element size."""
    q: float
    kv: float
    o: float
    e: float
    d: int
    rows: float  # B·Hq·Lq, rows of the log-sum-exp
    itemsize: int


def sizes(shape: dict[str, Any] | None, dtype: str | None) -> Sizes | None:
    if not shape:
        return None
    bh, lq, lk, d = shape.get("batch_heads"), shape.get("q_len"), shape.get("k_len"), shape.get("head_dim")
    if not all(isinstance(x, int) and x > 0 for x in (bh, lq, lk, d)):
        return None
    b, hq, hkv = shape.get("batch"), shape.get("q_heads"), shape.get("kv_heads")
    kv_heads = b * hkv if all(isinstance(x, int) and x > 0 for x in (b, hq, hkv)) else bh
    s = ITEMSIZE.get(dtype or "float32", 4)
    return Sizes(q=float(bh * lq * d), kv=float(kv_heads * lk * d), o=float(bh * lq * d), e=float(bh * lq * lk),
                 d=d, rows=float(bh * lq), itemsize=s)


def kv_cache_read(z: Sizes) -> float:
    """Bytes of the KV cache a decode call reads: K and V, each B·Hkv·Lk·D elements (the convention a
    decode is judged on: its query, output and log-sum-exp are 1/Lk of it and left out)."""
    return 2.0 * z.kv * z.itemsize


def fused_forward_flops(z: Sizes) -> float:
    """QKᵀ and AV of every score: 4·B·Hq·Lq·Lk·D (a one-token query masks nothing, so no causal half)."""
    return 4.0 * z.e * z.d


def stage_cost(z: Sizes, stage: str, pas: str, passes: int = 1, causal: bool | None = False) -> tuple[float, float] | None:
    """(FLOP, bytes) of one stage of one call; None for a stage the model does not cover."""
    s, e, d = z.itemsize, z.e, z.d
    n = max(1, int(passes))
    bwd = pas == "bwd"
    if stage == "fused":
        f = 4.0 * e * d * (0.5 if causal else 1.0)
        if bwd:
            return 2.5 * f, s * 2.0 * (z.q + 2.0 * z.kv + z.o) + LSE_BYTES * z.rows
        return f, s * (z.q + 2.0 * z.kv + z.o) + LSE_BYTES * z.rows
    if stage == "qk_matmul":
        if bwd:
            return 4.0 * e * d, s * (2.0 * e + 2.0 * z.q + 2.0 * z.kv)
        return 2.0 * e * d, s * (z.q + z.kv + e)
    if stage == "av_matmul":
        if bwd:
            return 4.0 * e * d, s * (2.0 * e + 2.0 * z.o + 2.0 * z.kv)
        return 2.0 * e * d, s * (e + z.kv + z.o)
    if stage in ELEMENTWISE:
        per_f = ELEMENTWISE[stage][1 if bwd else 0]
        if stage == "softmax" and bwd:
            return n * per_f * e, n * 3.0 * s * e
        return n * per_f * e, n * 2.0 * s * e
    return None
