"""Stage of every op and kernel inside an attention call.

The launching op decides first, the kernel name second (taxonomy: "Decide from the launching op
first"). Within a call, the *outermost* op with a meaning decides for its whole subtree (so the
``aten::masked_fill`` inside ``aten::_safe_softmax`` stays softmax), and position decides what a
plain op means: a batched matmul before the softmax is QK^T, after it AV; a linear before the core
is the QKV projection, after it the output projection. Backward ops take the stage of the forward
op their autograd node came from; where that op is a container (an autograd Function around the whole
attention) or unknown (a backward-only call), the ops under the node decide by the same rule in
backward order (AV's backward runs first, then softmax's, then QK^T's and the projections').
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache

from ..format import tags
from ..trace.link import Linked
from . import patterns as P
from . import op_roles
from .detect import Call
from .helper_kernels import helper_kind

STAGES = tags.STAGES
CONTAINER = "container"


def op_kind(L: Linked, i: int, flat_heads: bool = False) -> str | None:
    """What op i is to the stage rules, from its category and name (and a matmul's shapes).
    ``flat_heads``: the call's score path ran on 2-D matmuls (heads in a loop or flattened into
    rows), so a 2-D product of two activations is QKᵀ or AV there too (``aten::mm`` under
    ``aten::linear`` never decides: the outermost op does)."""
    kind = _kind_by_name(L.cat(i), L.names[i])
    if kind is _BMM:
        if op_roles.batched(L, i):
            return "bmm"
        return "bmm" if flat_heads and op_roles.product_at(L, i) is not None else "linear"
    return kind


_BMM = "bmm?"  # a matmul: batched or not depends on the op's shapes


@lru_cache(maxsize=65536)
def _kind_by_name(cat: str, name: str) -> str | None:
    # A trace has few distinct op names and many ops: decided once per name.
    if cat == "python_function":
        return CONTAINER
    if cat == "user_annotation":
        st = tags.parse_stage(name)
        return f"stage:{st}" if st else CONTAINER
    if name in P.FUSED_OPS or P.is_vendor_op(name) or name.startswith("FlexAttention"):
        return "fused"
    if name in P.ATTENTION_OPS:
        return CONTAINER
    if name in P.SOFTMAX_OPS or name in P.SOFTMAX_BACKWARD_OPS:
        return "softmax"
    if name in P.DROPOUT_OPS:
        return "dropout"
    if name in P.BMM_OPS:
        return _BMM
    if name in P.LINEAR_OPS:
        return "linear"
    if name in P.SCALE_MASK_OPS:
        return "elementwise"
    if name.startswith("triton_"):
        return "triton"
    return None


def _triton_stage(name: str) -> str:
    fam = P.kernel_family(name)
    if fam is not None and fam.stage == "fused":
        return "fused"
    if "_softmax" in name and "log_softmax" not in name:
        return "softmax"
    if "dropout" in name:
        return "dropout"
    return "other"


def _may_decide(name: str) -> bool:
    """Whether an op of this name can decide a stage under some category: by its name (any category
    but a module scope or an annotation), or as a ``tb_attn::stage`` annotation."""
    return _kind_by_name("", name) not in (None, CONTAINER) or tags.parse_stage(name) is not None


class Stager:
    """Stages of the ops of one linked trace's calls. The ops whose name can decide a stage are found
    once (per distinct name, at C speed): a call's walk visits only those, not each of its ops."""

    def __init__(self, L: Linked):
        self.L = L
        self._deciders = L.where_name(_may_decide)  # ascending

    def classify_call(self, call: Call, stage_of: list[str | None]) -> None:
        """Fill ``stage_of[i]`` for the forward ops of ``call``; a softmax written out (max, sub,
        exp, sum, div: detect.py found it) is the softmax stage."""
        self.classify_range(call.lo, call.hi, stage_of, flat_heads=bool(call.info.get("_flat_heads")))
        end = self.L.subtree_end
        for i in call.info.get("_written_softmax", ()):
            stage_of[i:end[i]] = ["softmax"] * (end[i] - i)

    def _decisive(self, lo: int, hi: int, flat_heads: bool = False) -> list[tuple[int, str | tuple[str, str]]]:
        """The outermost ops of ``[lo, hi)`` with a meaning, and their kinds, in op order (what a walk
        from ``lo`` finds that skips the subtree of each such op: no op inside one decides). A Triton
        op's kind is ("triton", the stage its name says)."""
        L, end, at = self.L, self.L.subtree_end, self._deciders
        out: list[tuple[int, str | tuple[str, str]]] = []
        covered = lo
        for k in range(bisect_left(at, lo), bisect_left(at, hi)):
            i = at[k]
            if i < covered:
                continue
            kind = op_kind(L, i, flat_heads)
            if kind is not None and kind != CONTAINER:
                out.append((i, ("triton", _triton_stage(L.names[i])) if kind == "triton" else kind))
                covered = end[i]
        return out

    def classify_range(self, lo: int, hi: int, stage_of: list[str | None], backward: bool = False,
                       flat_heads: bool = False) -> None:
        """Fill ``stage_of[i]`` for the ops ``[lo, hi)`` of one call; ``backward``: they are the ops
        of a backward node, which runs the stages in reverse order. Ops outside every decisive
        op's subtree are "other"."""
        if hi <= lo:
            return
        end = self.L.subtree_end
        decisive = self._decisive(lo, hi, flat_heads)
        stage_of[lo:hi] = ["other"] * (hi - lo)
        for (i, _), st in zip(decisive, _stages(tuple(kind for _, kind in decisive), backward)):
            stage_of[i:end[i]] = [st] * (end[i] - i)


@lru_cache(maxsize=4096)
def _stages(kinds: tuple, backward: bool) -> tuple[str, ...]:
    """The stage of each decisive op of a call from their kinds in order: position decides what a
    plain op means (the calls of one layer share their kinds: decided once)."""
    core = next((k for k, kind in enumerate(kinds) if kind in ("softmax", "fused", "stage:softmax", "stage:fused")), None)
    bmms = [k for k, kind in enumerate(kinds) if kind in ("bmm", "stage:qk_matmul", "stage:av_matmul")]
    if core is None and bmms:
        core = bmms[0] + 1 if len(bmms) > 1 else bmms[0]
    first = min([core] + [b for b in bmms if core is not None and b < core]) if core is not None else None
    last = max([core] + [b for b in bmms]) if core is not None else None

    before_core, after_core = ("av_matmul", "qk_matmul") if backward else ("qk_matmul", "av_matmul")
    # Several softmaxes in one call (heads in a Python loop): each matmul takes its side of the
    # softmax next to it: one right before a softmax (no matmul between) precedes it, any other follows one.
    cores = [k for k, kind in enumerate(kinds) if kind in ("softmax", "stage:softmax")]
    precedes: set[int] = set()
    if len(cores) > 1 and not backward:
        for k in bmms:
            nxt = next((j for j in range(k + 1, len(kinds)) if kinds[j] in ("softmax", "stage:softmax") or j in bmms), None)
            if nxt is not None and nxt in cores:
                precedes.add(k)
    before_first, after_last = ("out_proj", "qkv_proj") if backward else ("qkv_proj", "out_proj")
    out = []
    for k, kind in enumerate(kinds):
        if isinstance(kind, tuple):  # ("triton", its stage)
            st = kind[1]
        elif kind.startswith("stage:"):
            st = kind[6:]
        elif kind == "fused":
            st = "fused"
        elif kind == "softmax":
            st = "softmax"
        elif kind == "dropout":
            st = "dropout"
        elif kind == "bmm" and precedes:
            st = before_core if k in precedes else after_core
        elif kind == "bmm":
            st = before_core if core is not None and k < core else after_core
        elif kind == "linear":
            if first is None:
                st = "qkv_proj"
            elif k < first:
                st = before_first
            elif k > last:
                st = after_last
            else:
                st = "other"
        elif kind == "elementwise":
            if backward:
                st = "scale_mask" if first is None or k > first else "other"
            else:
                st = "scale_mask" if last is None or k < last else "other"
        else:
            st = "other"
        out.append(st)
    return tuple(out)


def kernel_stage(op_stage: str, kernel_name: str) -> str:
    """A kernel takes its op's stage, except helper kernels of a fused op (fills, copies), and the
    named sub-stages of a multi-kernel call (quantize, split_kv_reduce, ...): any other kernel a fused
    op launches is the fused attention, even one no family knows."""
    fam = P.kernel_family(kernel_name)
    if fam is not None and fam.stage in P.HELPER_STAGES:
        return fam.stage
    if op_stage == "fused":
        return "other" if helper_kind(kernel_name) is not None else "fused"
    if fam is not None and fam.stage == "fused":
        return "fused"
    return op_stage
