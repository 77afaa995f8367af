"""Shape of a call whose op carries none (MHA fast path, custom ops), from its QKᵀ matmul and softmax children."""

from __future__ import annotations

from bisect import bisect_left

from ..trace.link import Linked
from . import patterns as P
from . import shapes
from .detect import Call


def _is_qk_or_softmax(name: str) -> bool:
    return name in P.BMM_OPS or name in P.SOFTMAX_OPS


def fill(L: Linked, calls: list[Call], stage_of: list[str | None]) -> None:
    """``info["shape"]``/``["dtype"]`` of each call that has no shape yet, from the first forward op the
    stage rules call QKᵀ (``aten::bmm``/``matmul``/``baddbmm``/``einsum`` with recorded dims) and the
    first softmax with dims; the softmax's 4-D dims split B·H into B and H where the matmul is 3-D."""
    cand = L.where_name(_is_qk_or_softmax)
    if not cand:
        return
    names = L.names
    for c in calls:
        if "shape" in c.info or c.hi <= c.lo or c.info.get("backward_only"):
            continue
        qk = sm = None
        for j in cand[bisect_left(cand, c.lo):bisect_left(cand, c.hi)]:
            a = L.args(j)
            if a is None or not a.dims or L.node_of[j] >= 0:
                continue
            if qk is None and stage_of[j] == "qk_matmul" and names[j] in P.BMM_OPS:
                qk = j
            elif sm is None and stage_of[j] == "softmax" and names[j] in P.SOFTMAX_OPS:
                sm = j
            if qk is not None and sm is not None:
                break
        if qk is None and sm is None:
            continue
        qa = L.args(qk) if qk is not None else None
        sa = L.args(sm) if sm is not None else None
        info = shapes.from_matmuls(qa.dims if qa else None, sa.dims if sa else None,
                                   qa.types if qa else sa.types)
        for key, v in info.items():
            c.info.setdefault(key, v)
