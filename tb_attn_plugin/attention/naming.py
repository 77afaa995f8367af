"""The calls' names, layer types and shapes where their tags gave none (after measuring: child shapes read the stages)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from functools import lru_cache

import msgspec

from ..trace.events import Args
from ..trace.link import Linked
from . import child_shapes, heads, shapes
from .detect import Call
from .metrics import layer_type_of_path
from .patterns import is_vendor_op


def complete(L: Linked, calls: list[Call], stage_of: list) -> None:
    """Name every call (its layer and layer type), then fill shape, dtype, causal and heads where
    tags or matmuls gave none."""
    name_calls(calls)
    shape_info(L, calls)
    child_shapes.fill(L, calls, stage_of)
    heads.name_heads(L, calls)


def name_calls(calls: list[Call]) -> None:
    ordinal: Counter = Counter()
    for c in sorted(calls, key=lambda c: (c.step, c.start)):
        if c.root < 0:  # kernels alone: no op in the window launched them
            graph = any(k.graph for k in c.kernels)
            c.layer = f"{c.implementation} kernels ({'graph replay' if graph else 'no launching op'})"
            c.layer_type = c.layer
            continue
        bwd_only = bool(c.info.get("backward_only"))
        if not c.layer:
            key = (c.step, c.implementation, bwd_only)
            k = ordinal[key]
            ordinal[key] += 1
            c.layer = f"{c.implementation}#{k}" + (" (backward only)" if bwd_only else "")
        if bwd_only and c.layer_type and not c.layer_type.endswith("(backward only)"):
            c.layer_type += " (backward only)"
        if not c.layer_type:
            tag = c.info.get("tag") or {}
            if tag.get("cls"):
                c.layer_type = str(tag["cls"])
            elif c.source == "tag":
                c.layer_type = layer_type_of_path(c.layer)
            else:
                c.layer_type = f"{c.implementation} attention"


def shape_info(L: Linked, calls: list[Call]) -> None:
    """Fill shape/dtype/causal from the outermost attention op when tags or matmuls gave none."""
    # The ops that may carry a shape, found once by name; each call looks at those inside it.
    cand = L.where_name(_may_carry_shape)
    for c in calls:
        if "shape" in c.info and "causal" in c.info:
            continue
        k = bisect_left(cand, c.lo)
        while k < len(cand) and cand[k] < c.hi:
            name, a = L.names[cand[k]], L.args(cand[k])
            k += 1
            if a is None or (name not in shapes.SIGNATURES and not a.dims):
                continue  # a vendor op says nothing without its dims
            for key, v in _op_shape(name, bytes(a.dims_raw), bytes(a.types_raw), bytes(a.concrete_raw)):
                c.info.setdefault(key, dict(v) if isinstance(v, dict) else v)  # a call's own copy
            if "shape" in c.info:
                break


def _may_carry_shape(name: str) -> bool:
    return name in shapes.SIGNATURES or is_vendor_op(name)


@lru_cache(maxsize=4096)
def _op_shape(name: str, dims: bytes, types: bytes, concrete: bytes) -> tuple:
    """shapes.from_attention_op of one op's raw shapes, as items; decided once per distinct op: a
    layer's op carries the same shapes in every step."""
    a = Args(dims_raw=msgspec.Raw(dims), types_raw=msgspec.Raw(types), concrete_raw=msgspec.Raw(concrete))
    return tuple(shapes.from_attention_op(name, a.dims, a.types, a.concrete).items())
