"""MHA, MQA or GQA: whether K/V have fewer heads than Q, for each call.

From K/V's own shapes first (a QKᵀ matmul that broadcasts a one-head K, an SDPA op with
``enable_gqa`` and fewer K/V heads); then from an ``aten::expand`` of K/V before QKᵀ whose recorded
shapes show K/V's heads before the repeat (a bare ``expand`` + ``reshape``, no Python stack needed:
[B, Hkv, 1, L, D] to [B, Hkv, r, L, D] with Hkv·r = Q's heads, or [B, 1, L, D] to [B, H, L, D]);
then from a repeat of K and V inside the call, which hides the K/V heads from the matmuls (Hugging
Face's ``repeat_kv`` frame, ``aten::repeat_interleave``): then the call is GQA and its K/V head count
is unknown, not Q's. Names of the repeats are rows of KV_REPEAT.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from functools import lru_cache

from .patterns import KV_EXPAND_OPS

# (pattern over an op or Python frame name, real example, source)
KV_REPEAT: tuple[tuple[str, str, str], ...] = (
    (r"(^|: )repeat_kv$", "transformers/models/llama/modeling_llama.py(72): repeat_kv",
     "source: huggingface/transformers models/llama/modeling_llama.py (def repeat_kv: expand + reshape of K and V "
     "to Q's heads), a python_function frame when the profiler records Python stacks"),
    (r"^aten::repeat_interleave$", "aten::repeat_interleave",
     "source: PyTorch SDPA math docs (k.repeat_interleave(q.size(-3) // k.size(-3), -3) for enable_gqa); GPT-NeoX/Falcon-style MQA"),
)
_KV_REPEAT = re.compile("|".join(f"(?:{p})" for p, _, _ in KV_REPEAT))


@lru_cache(maxsize=65536)
def _is_repeat(name: str) -> bool:
    return bool(_KV_REPEAT.search(name))


def name_heads(L, calls) -> None:
    """Set each call's info["heads"] (MHA, MQA or GQA) where the trace says; a repeat of K/V makes
    the matmuls' kv_heads unknown (they saw the repeated K). A repeat counts from the start of the
    scope around the call's first op (K and V are repeated before QKᵀ), never before an earlier call."""
    repeats = L.where_name(_is_repeat)
    expands = L.where_name(lambda nm: nm in KV_EXPAND_OPS)
    prev_hi = 0
    for c in sorted(calls, key=lambda c: c.lo):
        shape = c.info.get("shape")
        repeated = False
        expanded = None
        if (repeats or expands) and c.hi > c.lo:
            p = L.parent[c.lo]
            lo = max(p + 1 if p >= 0 else c.lo, prev_hi)
            k = bisect_left(repeats, lo)
            repeated = k < len(repeats) and repeats[k] < c.hi and L.node_of[repeats[k]] < 0
            if expands and shape:  # K/V are repeated before QKᵀ: from the scope's start, or the previous call's end
                expanded = _expanded_kv_heads(L, expands, max(p + 1, prev_hi), c.hi, shape)
        if c.hi > c.lo:
            prev_hi = max(prev_hi, c.hi)
        hq = shape.get("q_heads") if shape else None
        hkv = shape.get("kv_heads") if shape else None
        if expanded is not None and isinstance(hq, int) and hkv == hq:
            c.info["shape"] = shape = dict(shape, kv_heads=expanded)
            hkv = expanded
        if isinstance(hq, int) and isinstance(hkv, int) and 0 < hkv < hq:
            c.info["heads"] = "MQA" if hkv == 1 else "GQA"
        elif repeated:
            c.info["heads"] = "GQA"
            if shape is not None and hkv == hq:
                c.info["shape"] = dict(shape, kv_heads=None)
        elif isinstance(hq, int) and hq == hkv:
            c.info["heads"] = "MHA"


def _expanded_kv_heads(L, expands: list[int], lo: int, hi: int, shape: dict) -> int | None:
    """K/V's own head count from two ``aten::expand`` ops (K's and V's) among ops [lo, hi) in forward
    that repeat a [.., Hkv, 1, Lk, D] tensor to [.., Hkv, r, Lk, D] with Hkv·r = Q's heads, or a
    [.., 1, Lk, D] one to [.., Hq, Lk, D]; None when no expands there say so (shapes not recorded,
    other expands)."""
    hq, lk, d = shape.get("q_heads"), shape.get("k_len"), shape.get("head_dim")
    if not isinstance(hq, int) or hq < 2:
        return None
    seen: list[int] = []  # K's and V's: one expand alone may be a mask's ([B, 1, L, L] when L = D)
    k = bisect_left(expands, lo)
    while k < len(expands) and expands[k] < hi:
        i = expands[k]
        k += 1
        if L.node_of[i] >= 0:
            continue  # backward
        a = L.args(i)
        dims, conc = (a.dims, a.concrete) if a is not None else (None, None)
        x = dims[0] if isinstance(dims, list) and dims else None
        size = _int_list(conc[1]) if isinstance(conc, list) and len(conc) > 1 else None
        if not isinstance(x, list) or size is None or len(size) != len(x) or len(x) < 4 or size[-2:] != [lk, d]:
            continue
        if len(x) >= 5 and x[-3] == 1 and size[-3] > 1 and size[-4] == x[-4] and size[-4] * size[-3] == hq:
            seen.append(size[-4])  # repeat_kv: [.., Hkv, 1, L, D] -> [.., Hkv, r, L, D], then reshaped to Hq heads
        elif x[-3] == 1 and size[-3] == hq:
            seen.append(1)  # one K/V head broadcast to every query head
        if len(seen) >= 2 and seen[-1] == seen[-2]:
            return seen[-1]
    return None


@lru_cache(maxsize=4096)
def _int_list_text(text: str) -> tuple[int, ...] | None:
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(v, list) and len(v) <= 16 and all(type(x) is int and 0 <= x < 1 << 48 for x in v):
        return tuple(v)
    return None


def _int_list(v) -> list[int] | None:
    """A Concrete Inputs size list ("[2, 2, 4, 16, 8]", as torch.profiler records an int[] argument)."""
    if not isinstance(v, str) or len(v) > 256:
        return None
    got = _int_list_text(v)
    return list(got) if got is not None else None
