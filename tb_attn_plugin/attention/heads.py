"""MHA, MQA or GQA: whether K/V have fewer heads than Q, for each call.

From K/V's own shapes first (a QKᵀ matmul that broadcasts a one-head K, an SDPA op with
``enable_gqa`` and fewer K/V heads); then from a repeat of K and V inside the call, which hides the
K/V heads from the matmuls (Hugging Face's ``repeat_kv`` frame, ``aten::repeat_interleave``): then the
call is GQA and its K/V head count is unknown, not Q's. Names of the repeats are rows of KV_REPEAT.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache

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
    prev_hi = 0
    for c in sorted(calls, key=lambda c: c.lo):
        shape = c.info.get("shape")
        repeated = False
        if repeats and c.hi > c.lo:
            p = L.parent[c.lo]
            k = bisect_left(repeats, max(p + 1 if p >= 0 else c.lo, prev_hi))
            repeated = k < len(repeats) and repeats[k] < c.hi and L.node_of[repeats[k]] < 0
        if c.hi > c.lo:
            prev_hi = max(prev_hi, c.hi)
        hq = shape.get("q_heads") if shape else None
        hkv = shape.get("kv_heads") if shape else None
        if isinstance(hq, int) and isinstance(hkv, int) and 0 < hkv < hq:
            c.info["heads"] = "MQA" if hkv == 1 else "GQA"
        elif repeated:
            c.info["heads"] = "GQA"
            if shape is not None and hkv == hq:
                c.info["shape"] = dict(shape, kv_heads=None)
        elif isinstance(hq, int) and hq == hkv:
            c.info["heads"] = "MHA"
