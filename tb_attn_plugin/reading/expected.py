"""Expected against actual, per call: the kernels each call should run (expectations.py) and what ran.

The unit is a GPU kernel (memcpy and memset included) when the trace has GPU activity; on a CPU
trace it is an op that does work: a cpu op that is no view, allocation or no-op cast
(expectations.WORK_FREE_OPS) and has no such op below it, so aten::matmul counts once, as its
aten::bmm. Each item of a call's forward is, in order: an extra explained by a cause
(expectations.CAUSES), one of the expected steps, a repeat of a step, an unexplained kernel inside
the attention op, or outside the attention core (projections, rotary embedding, ...: not counted).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from functools import lru_cache
from operator import itemgetter
from typing import Any, NamedTuple

import msgspec
import numpy as np

from ..attention import patterns as P
from ..attention.detect import Call
from ..trace.link import Linked
from ..table.arrays import ints
from . import expectations as X

STEP_OF_STAGE = {"qk_matmul": "qk_matmul", "av_matmul": "av_matmul", "softmax": "softmax", "dropout": "dropout",
                 "fused": "fused"}
SCALE_OPS = frozenset({"aten::mul", "aten::div", "aten::mul_", "aten::div_", "aten::_masked_scale"})
OUTSIDE_STAGES = frozenset({"qkv_proj", "out_proj"})
MAX_NAMES = 5
MAX_EVIDENCE = 8  # event ids kept per extra or flag: the first items that earned it


class CallReading(msgspec.Struct):
    unit: str
    ran: int = 0
    steps: Counter = msgspec.field(default_factory=Counter)  # step -> items
    extras: dict[tuple[str, str, int], list] = msgspec.field(default_factory=dict)  # (cause, step or "", CAUSES row or -1) -> [count, us, Counter(names), evidence ids]
    flags: dict[str, list] = msgspec.field(default_factory=dict)  # flag -> [count, us, Counter(names), ids]
    outside: list = msgspec.field(default_factory=lambda: [0, 0.0, Counter()])
    transposes: int | None = None


def _items_gpu(L: Linked, calls: list[Call], call_of: list[int]) -> list[list[tuple[int, str, float, int]]]:
    """Per call, its forward kernels as (launching op or -1, kernel name, µs, the kernel's position)."""
    out: list[list[tuple[int, str, float, int]]] = [[] for _ in calls]
    node_of = L.node_of
    for k in L.kernels:
        op = k.op
        if op >= 0 and call_of[op] >= 0 and node_of[op] < 0:
            out[call_of[op]].append((op, k.name, k.dur, k.i))
    for c in calls:
        for k in c.kernels:
            if k.op < 0 or call_of[k.op] != c.id:
                fam = P.kernel_family(k.name)
                if fam is None or fam.pass_ != "bwd":
                    out[c.id].append((-1, k.name, k.dur, k.i))
    return out


def _host_scalar(L: Linked, i: int) -> bool:
    """An aten::to under an elementwise op with a Python number: converted on the host, no kernel."""
    names, parent = L.names, L.parent
    j = i
    while j >= 0:
        nm = names[j]
        if nm == "aten::to":
            p = parent[j]
            return p >= 0 and bool(X.HOST_SCALAR_PARENTS.match(names[p]))
        if nm not in ("aten::_to_copy", "aten::copy_", "aten::empty_strided", "aten::empty"):
            return False
        j = parent[j]
    return False


def _items_cpu(L: Linked, c: Call, call_of: list[int]) -> list[tuple[int, str, float]]:
    """A call's forward work ops as (op, name, µs of the op)."""
    lo, hi = c.lo, c.hi
    names, dur, parent, node_of, cpu = L.names, L.dur, L.parent, L.node_of, L.cpu
    below = [False] * (hi - lo)  # some op below does work
    work = [False] * (hi - lo)
    for i in range(hi - 1, lo - 1, -1):
        if call_of[i] != c.id or node_of[i] >= 0 or not cpu[i]:
            continue
        nm = names[i]
        w = not below[i - lo] and nm not in X.WORK_FREE_OPS and not _host_scalar(L, i)
        work[i - lo] = w
        p = parent[i]
        if p >= lo and (w or below[i - lo]):
            below[p - lo] = True
    return [(i, names[i], dur[i], i) for i in range(lo, hi) if work[i - lo]]


class _Paths:
    """The names of op ``i``'s enclosing ops within a call (outermost first, not ``i`` itself), each name
    once: every reader of a path asks "is any of them ...", or the outermost that is, so a repeat adds
    nothing. Each op's path is built from its parent's, once, so a chain of 3,000 nested ops costs what
    its few distinct names do, not 3,000 x 3,000 steps (a 1.1 MB trace so nested took 5-20 s)."""

    __slots__ = ("parent", "names", "lo", "memo")

    def __init__(self, L: Linked, lo: int):
        self.parent, self.names, self.lo = L.parent, L.names, lo
        self.memo: dict[int, tuple[str, ...]] = {}  # op -> its path and its own name

    def __call__(self, i: int) -> tuple[str, ...]:
        p = self.parent[i]
        return self._through(p) if p >= self.lo else ()

    def _through(self, p: int) -> tuple[str, ...]:
        memo, lo = self.memo, self.lo
        chain = []
        while p >= lo and p not in memo:  # up to the nearest op already known
            chain.append(p)
            p = self.parent[p]
        base = memo[p] if p >= lo else ()
        for q in reversed(chain):
            nm = self.names[q]
            if nm not in base:
                base = base + (nm,)
            memo[q] = base
        return base


def _cause(name: str, path: list[str] | tuple[str, ...], index: bool = False) -> X.Cause | None:
    return _cause_of(name, tuple(path), index)


@lru_cache(maxsize=65536)
def _cause_of(name: str, path: tuple[str, ...], index: bool = False) -> X.Cause | None:
    """The first CAUSES row for an op (or kernel) under ``path``; a layer's calls repeat the same paths.
    ``index``: the op is one of index arithmetic (_index_ops), which the rows with index_operands ask for."""
    for rule in X.CAUSES:
        if rule.index_operands and not index:
            continue
        if rule.item and not rule.item_rx.search(name):
            continue
        if rule.item_not and rule.item_not_rx.search(name):
            continue
        if rule.inside and not any(map(rule.inside_rx.search, path)):
            continue
        if rule.within and not any(map(rule.within_rx.search, path)):
            continue
        if rule.not_inside and any(map(rule.not_inside_rx.search, path)):
            continue
        return rule
    return None


def _index_ops(L: Linked, c: Call, items: list) -> frozenset[int]:
    """The item ops of a call that are index arithmetic (a position bias or mask computed from integer
    indices), outside any attention op: an op of P.INDEX_ARITH_OPS (whose types the reader keeps) that
    takes an integer tensor (rank >= 1) and no other tensor of the scores' rank; or that takes only tensors
    shaped like the integer tensors of such ops before it in the call (their float chain: T5's
    .float() / max_exact, log). No data flow is recorded, so shape stands for it; the scores and q, k, v
    (rank >= SCORES_RANK) never join."""
    seen: set[tuple] = set()
    out = []
    names = L.names
    path_of = _Paths(L, c.lo)
    for op, _, _, _ in items:
        if op < 0 or names[op] not in P.INDEX_ARITH_OPS:
            continue
        a = L.args(op)
        types = a.types if a is not None else None
        if types is None or not (seen or any(t in X.INDEX_DTYPES for t in types if isinstance(t, str))):
            continue  # the common case, decided on the types alone: no integer tensor in the call yet
        dims = a.dims if a is not None else None
        if dims is None or len(dims) != len(types):
            continue
        ints: list[tuple] = []
        others: list[tuple] = []
        for d, t in zip(dims, types):
            if isinstance(d, list) and d and isinstance(t, str) and all(type(x) is int for x in d):
                (ints if t in X.INDEX_DTYPES else others).append(tuple(d))
        if any(len(d) >= X.SCORES_RANK for d in others):
            continue
        if ints:
            seen.update(ints)
        elif not others or not all(d in seen for d in others):
            continue
        if not _inside_attention_op(path_of(op), names[op]):
            out.append(op)
    return frozenset(out)


def _step(stage: str, op_name: str, path: tuple[str, ...]) -> str | None:
    st = STEP_OF_STAGE.get(stage)
    if st is not None:
        return st
    if stage in P.HELPER_STAGES:
        return stage
    if stage == "scale_mask":
        for nm in (*path, op_name):
            if nm in P.SCALE_MASK_OPS:
                return "scale" if nm in SCALE_OPS else "mask"
        return "mask"
    return None


def _inside_attention_op(path: tuple[str, ...], name: str) -> bool:
    return any(P.attention_op(a) is not None for a in (*path, name))


OUTSIDE, EXTRA, STEP, FP32_STEP = 0, 1, 2, 3  # what an item of a call is (_judge)
_NAME = itemgetter(1)  # an item's kernel or op name


def read_call(L: Linked, c: Call, items: list[tuple[int, str, float]], stage_of: list, unit: str, kernel_unit: bool,
              where: tuple[list[int], list[int]], alike: _Alike | None = None) -> CallReading:
    """``where``: the positions of the attention ops and of the transposes (_transposes); ``alike``:
    what the items of calls alike were found to be, shared by the calls of one trace."""
    plan = _planned(L, c, items, stage_of, kernel_unit, alike)
    us = [it[2] for it in items]
    at = us.__getitem__
    # each bucket's µs summed in item order from 0.0, as adding them one by one would
    ids = _evidence_ids(L, items, kernel_unit)
    r = CallReading(unit=unit, ran=plan.ran, steps=Counter(plan.steps),
                    extras={key: [n, sum(map(at, idx), 0.0), names, [ids(i) for i in idx[:MAX_EVIDENCE]]]
                            for key, n, names, idx in plan.extras},
                    flags={key: [n, sum(map(at, idx), 0.0), names, [ids(i) for i in idx[:MAX_EVIDENCE]]]
                           for key, n, names, idx in plan.flags},
                    outside=[plan.outside[0], sum(map(at, plan.outside[2]), 0.0), plan.outside[1]])
    if c.hi > c.lo:
        r.transposes = _transposes(L, c, *where)
    return r


def _evidence_ids(L: Linked, items: list, kernel_unit: bool):
    """An item's id in the raw trace: a kernel's correlation id (None where its record has none), or on a CPU
    trace its op's start (µs, as recorded)."""
    if kernel_unit:
        kt = L.kernel_table
        has, corr = (kt.has("correlation"), kt["correlation"]) if kt is not None else (None, None)
        return lambda i: int(corr[items[i][3]]) if has is not None and has[items[i][3]] else None
    return lambda i: float(L.ts[items[i][3]])


class _Plan(NamedTuple):
    """What a call's items come to, their times aside: the items that ran, the steps, and each bucket
    (an extra, a flag, the outside) as its count, its names (a Counter that readings share: read
    only) and the positions of the items whose µs it sums."""

    ran: int
    steps: Counter
    extras: tuple[tuple[Any, int, Counter, tuple[int, ...]], ...]
    flags: tuple[tuple[str, int, Counter, tuple[int, ...]], ...]
    outside: tuple[int, Counter, tuple[int, ...]]


def _plan(judged: list[tuple[int, Any]], items: list[tuple[int, str, float]]) -> _Plan:
    ran = 0
    steps: Counter = Counter()
    extras: dict[Any, list] = {}
    flags: dict[str, list] = {}
    outside: list = [0, Counter(), []]
    for i, ((kind, key), (_, name, _, _)) in enumerate(zip(judged, items)):
        if kind == OUTSIDE:
            _add(outside, key, i)
            continue
        ran += 1
        if kind == EXTRA:
            _add(extras.setdefault(key, [0, Counter(), []]), name, i)
            continue
        if kind == FP32_STEP:  # an attention GEMM on CUDA cores
            _add(flags.setdefault("fp32_gemm", [0, Counter(), []]), name, i)
        steps[key] += 1
        if steps[key] > 1 and key not in P.HELPER_STAGES:
            _add(extras.setdefault(("repeated_step", key, -1), [0, Counter(), []]), name, i)
    return _Plan(ran, steps, tuple((k, n, names, tuple(idx)) for k, (n, names, idx) in extras.items()),
                 tuple((k, n, names, tuple(idx)) for k, (n, names, idx) in flags.items()),
                 (outside[0], outside[1], tuple(outside[2])))


def _add(bucket: list, name: str, i: int) -> None:
    bucket[0] += 1
    bucket[1][name] += 1
    bucket[2].append(i)


class _Alike:
    """What the items of each kind of call come to (_Plan), for the calls of one trace."""

    def __init__(self, L: Linked):
        self.parent = ints(L.parent)  # once: a list column (no C helper) converts here, not per call
        self.memo: dict[tuple, _Plan] = {}


def _planned(L: Linked, c: Call, items: list[tuple[int, str, float]], stage_of: list, kernel_unit: bool,
             alike: _Alike | None) -> _Plan:
    """The plan of _judge's answer, found once per kind of call: a layer's calls in every step run the
    same ops (names, stages, nesting, relative to the call's first op) and the same kernels, and what
    each item is depends on nothing else (its time only adds up). A call with an item outside its op
    range is judged on its own."""
    lo, hi = c.lo, c.hi
    if alike is None or lo < 0:
        return _plan(_judge(L, c, items, stage_of, kernel_unit), items)
    at = []  # each item's op relative to the call's first op
    for op, _, _, _ in items:
        if op < 0:
            at.append(-1)
        elif lo <= op < hi:
            at.append(op - lo)
        else:
            return _plan(_judge(L, c, items, stage_of, kernel_unit), items)
    index = _index_ops(L, c, items)
    key = (kernel_unit, str(c.info.get("dtype") or ""), tuple(at), tuple(map(_NAME, items)), tuple(sorted(o - lo for o in index)),
           tuple(L.names[lo:hi]), tuple(stage_of[lo:hi]), np.maximum(alike.parent[lo:hi] - lo, -1).tobytes())
    got = alike.memo.get(key)
    if got is None:
        got = alike.memo[key] = _plan(_judge(L, c, items, stage_of, kernel_unit, index), items)
    return got


def _judge(L: Linked, c: Call, items: list[tuple[int, str, float]], stage_of: list,
           kernel_unit: bool, index: frozenset[int] | None = None) -> list[tuple[int, Any]]:
    """What each item of a call is, in order: (OUTSIDE, the name it counts under), (EXTRA, (cause,
    step or "")), (STEP, step) or (FP32_STEP, step): a step run as an FP32 GEMM."""
    out: list[tuple[int, Any]] = []
    # Elementwise ops before the attention starts (its first QK^T matmul, fused kernel or attention op)
    # and outside any attention op (rotary embedding, a scale folded into the projection) are the layer's
    # preparation, not steps of this attention: a fused call has no QK^T kernel to start it.
    path_of = _Paths(L, c.lo)
    first_qk = min((op for op, name, _, _ in items if op >= 0 and (stage_of[op] in ("qk_matmul", "fused")
                                                             or _attention_start(L, op, path_of, name, kernel_unit))),
                   default=-1)
    if index is None:
        index = _index_ops(L, c, items)
    low = str(c.info.get("dtype") or "").lower()
    low_precision = any(t in low for t in X.LOW_PRECISION)
    for op, name, _, _ in items:
        path = path_of(op) if op >= 0 else ()
        op_name = L.names[op] if op >= 0 else ""
        stage = (stage_of[op] or "other") if op >= 0 else _kernel_only_stage(name)
        if kernel_unit:  # the kernel's own family says what it is, whatever its op launched besides
            fam = P.kernel_family(name)
            if fam is not None and (fam.stage == "fused" or fam.stage in P.HELPER_STAGES):
                stage = fam.stage  # a fused kernel of any family (a --patterns row, FA3 under an autograd Function),
                # or a helper (a KV-cache write launched by the attention op itself)
        if stage in OUTSIDE_STAGES:
            out.append((OUTSIDE, op_name or name))  # the op: a projection's kernels are named by their GEMM library
            continue
        if stage == "scale_mask" and 0 <= op < first_qk and not _inside_attention_op(path, op_name):
            out.append((OUTSIDE, op_name))
            continue
        rule = None
        if op >= 0:
            ix = 0 <= first_qk <= op and op in index  # index arithmetic once the scores exist (T5's bias)
            rule = _cause(op_name, path, ix)
            if rule is None and kernel_unit:
                rule = _cause(name, (*path, op_name), ix)  # a kernel named like its work (triu_tril_kernel, Memcpy DtoD)
        if rule is not None:
            out.append((EXTRA, (rule.cause, "", X.CAUSES.index(rule))))  # the row: its evidence, what and fix
            continue
        if stage in P.HELPER_STAGES:  # a family's own helper kernel: a row of its own, never an expected step
            out.append((EXTRA, (stage, "", -1)))
            continue
        step = _step(stage, op_name, path)
        if step is not None:
            fp32 = kernel_unit and low_precision and step in ("qk_matmul", "av_matmul") and _fp32_gemm(name)
            out.append((FP32_STEP if fp32 else STEP, step))
            continue
        if op < 0 or _inside_attention_op(path, op_name):
            out.append((EXTRA, ("unexplained", "", -1)))
        else:
            out.append((OUTSIDE, op_name or name))
    return out


def _attention_start(L: Linked, op: int, path_of: _Paths, name: str, kernel_unit: bool) -> bool:
    """The item starts the attention itself: its op (or one enclosing it in the call) is an attention op,
    or on a GPU its kernel is a fused attention kernel."""
    if kernel_unit and P.fused_family(name) is not None:
        return True
    return _inside_attention_op(path_of(op), L.names[op])


@lru_cache(maxsize=65536)
def _fp32_gemm(name: str) -> bool:
    return X.FP32_GEMM.search(name) is not None


def _kernel_only_stage(name: str) -> str:
    fam = P.kernel_family(name)
    return fam.stage if fam is not None and fam.stage is not None else "other"


def _transposes(L: Linked, c: Call, att: list[int], tr: list[int]) -> int | None:
    """aten::transpose ops inside the outermost attention op of the call (metadata only: no kernel).
    ``att``, ``tr``: the positions (ascending) of the attention ops and of the transposes."""
    k = bisect_left(att, c.lo)
    if k == len(att) or att[k] >= c.hi:
        return None
    i = att[k]
    return bisect_left(tr, L.subtree_end[i]) - bisect_left(tr, i + 1)


def _is_attention_op(name: str) -> bool:
    return P.attention_op(name) is not None


def read_calls(L: Linked, calls: list[Call], call_of: list[int], stage_of: list, has_gpu: bool) -> list[CallReading]:
    """One reading per call (forward only, as the post counts)."""
    where = (L.where_name(_is_attention_op), L.where_name(X.TRANSPOSE_OP.__eq__))
    alike = _Alike(L)
    if has_gpu:
        per_call = _items_gpu(L, calls, call_of)
        return [read_call(L, c, per_call[c.id], stage_of, "kernels", True, where, alike) for c in calls]
    return [read_call(L, c, _items_cpu(L, c, call_of) if c.hi > c.lo else [], stage_of, "ops", False, where, alike)
            for c in calls]


def _table_row(c: Call) -> str:
    """The expectations row of a call: its implementation's, except nn.MultiheadAttention recorded with
    need_weights=True (the collector's tag), which runs the explicit path."""
    if c.implementation == "mha" and (c.info.get("tag") or {}).get("need_weights"):
        return "mha_weights"
    return c.implementation


def expected_steps(implementation: str, seen: Counter, info: dict[str, Any]) -> list[str] | None:
    """The steps expected of one call: the table's, "?" ones when the call has them."""
    row = X.expectation(implementation)
    if not row.steps:
        return None
    out = []
    for s in row.steps:
        if not s.endswith("?"):
            out.append(s)
            continue
        s = s[:-1]
        has = seen.get(s, 0) > 0
        if s == "mask":
            has = has or bool(info.get("causal")) or info.get("mask") == "tensor"
        if s == "dropout":
            has = has or bool(info.get("dropout"))
        if has:
            out.append(s)
    return out  # the table's steps only: what ran besides them is an extra with its cause


MASK_FIX_CAUSAL = ("is_causal=True is already passed, so this call ran a backend that builds the mask ({impl}): "
                   "see why not flash for what kept it off a fused backend")
MASK_FIX_TENSOR = ("if the mask is causal, pass is_causal=True (no mask) so a fused backend (flash, efficient, cuDNN) "
                   "builds none; or build the mask once outside the layer")
MASK_FIX_UNKNOWN = "build the mask once outside the layer (the call's mask and is_causal were not recorded)"


def _mask_fix(cs: list[Call], implementation: str) -> str:
    """The fix for a mask built per call, earned by what the calls recorded: "pass is_causal" only for an
    explicit mask without is_causal."""
    if any(c.info.get("causal") for c in cs):
        return MASK_FIX_CAUSAL.format(impl=implementation)
    if any(c.info.get("mask") == "tensor" for c in cs):
        return MASK_FIX_TENSOR
    return MASK_FIX_UNKNOWN


def _cause_row(cause: str, step: str, implementation: str, variant: int = -1) -> tuple[str, str, str]:
    """(what, fix, source) of an extra; ``variant``: the CAUSES row that matched it, or -1."""
    if 0 <= variant < len(X.CAUSES) and X.CAUSES[variant].cause == cause:
        rule = X.CAUSES[variant]
        return rule.what, rule.fix, rule.source
    if cause == "repeated_step":
        what, fix, src = X.REPEATED_STEP.get((implementation, step), X.REPEATED_DEFAULT)
        return f"{step} step repeated: {what}", fix, src
    if cause in X.HELPER_CAUSES:
        return X.HELPER_CAUSES[cause]
    if cause == "unexplained":
        return ("ran inside the attention op, no expectation explains it", "",
                "tb-attn: no row of reading/expectations.py CAUSES matches")
    for rule in X.CAUSES:
        if rule.cause == cause:
            return rule.what, rule.fix, rule.source
    return cause, "", ""


def no_forward(r: CallReading) -> bool:
    """A call on a GPU trace whose attention forward left no kernel in it (its projections may have): a cut GPU
    window or a backward-only call. Its zeros are not measurements: group() and host_cost.group() leave it out
    and count it apart."""
    return r.unit == "kernels" and r.ran == 0


def group(calls: list[Call], readings: list[CallReading]) -> dict[tuple[str, str], dict[str, Any]]:
    """The ``expected`` reading of each (layer type, implementation): counts per call (the most common
    count, and its range), each extra with its count and time per call and per step, over the calls
    whose forward the trace recorded (the others counted in ``calls_without_forward``)."""
    by: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        by.setdefault((c.layer_type, c.implementation), []).append(c)
    out = {}
    for key, all_cs in by.items():
        kept = [c for c in all_cs if not no_forward(readings[c.id])]
        apart = len(all_cs) - len(kept)
        cs = kept or all_cs
        rs = [readings[c.id] for c in cs]
        n = len(cs)
        steps = {c.step for c in cs if c.step >= 0}
        n_steps = len(steps) or None
        ran = Counter(r.ran for r in rs)
        ran_mode = max(ran, key=lambda v: (ran[v], -v))
        exp_counts = Counter()
        exp_steps = None
        for c, r in zip(cs, rs):
            e = expected_steps(_table_row(c), r.steps, c.info)
            if e is not None:
                exp_counts[len(e)] += 1
                exp_steps = exp_steps or e
        weights = any(_table_row(c) == "mha_weights" for c in cs)
        row = X.expectation("mha_weights" if weights else key[1])
        expected = max(exp_counts, key=lambda v: (exp_counts[v], -v)) if exp_counts else None
        extras_acc: dict[tuple[str, str, int], list] = {}
        for r in rs:
            for k, (cnt, us, names, ids) in r.extras.items():
                acc = extras_acc.setdefault(k, [0, 0.0, Counter(), []])
                acc[0] += cnt
                acc[1] += us
                acc[2].update(names)
                acc[3].extend(ids[:MAX_EVIDENCE - len(acc[3])])
        merged: dict[tuple[str, str, str], list] = {}  # rows of one cause that say the same thing are one extra
        for (cause, step, variant), (cnt, us, names, ids) in extras_acc.items():
            what, fix, src = _cause_row(cause, step, key[1], variant)
            if cause == "mask_built_per_call":
                fix = _mask_fix(cs, key[1])
            acc = merged.setdefault((cause, step, what), [0, 0.0, Counter(), fix, src, []])
            acc[0] += cnt
            acc[1] += us
            acc[2].update(names)
            acc[5].extend(ids[:MAX_EVIDENCE - len(acc[5])])
        extras = []
        for (cause, step, what), (cnt, us, names, fix, src, ids) in sorted(merged.items(), key=lambda kv: -kv[1][1]):
            extras.append({"cause": cause, "step": step or None, "what": what, "per_call": round(cnt / n, 3),
                           "us_per_call": round(us / n, 3), "us_per_step": round(us / n_steps, 3) if n_steps else None,
                           "names": [nm for nm, _ in names.most_common(MAX_NAMES)], "fix": fix, "source": src,
                           "evidence": _evidence(rs[0].unit, ids)})
        flags = []
        fl: dict[str, list] = {}
        for r in rs:
            for k, (cnt, us, names, ids) in r.flags.items():
                acc = fl.setdefault(k, [0, 0.0, Counter(), []])
                acc[0] += cnt
                acc[1] += us
                acc[2].update(names)
                acc[3].extend(ids[:MAX_EVIDENCE - len(acc[3])])
        for k, (cnt, us, names, ids) in fl.items():
            flags.append({"flag": k, "what": "FP32 GEMM on CUDA cores (sgemm) while the inputs are bf16/fp16",
                          "per_call": round(cnt / n, 3), "us_per_call": round(us / n, 3),
                          "names": [nm for nm, _ in names.most_common(MAX_NAMES)],
                          "fix": "a fused backend, or allow reduced-precision math "
                                 "(torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True))",
                          "source": "blog: 'Tensor cores left vacant' (sgemm, not the s16816 bf16 GEMM)",
                          "evidence": _evidence(rs[0].unit, ids)})
        tr = Counter(r.transposes for r in rs if r.transposes is not None)
        transposes = max(tr, key=lambda v: (tr[v], -v)) if tr else None
        out_cnt = sum(r.outside[0] for r in rs)
        out_us = sum(r.outside[1] for r in rs)
        out_names: Counter = Counter()
        for r in rs:
            out_names.update(r.outside[2])
        unit = rs[0].unit
        reading = {
            "unit": unit,
            "expected": expected,
            "expected_steps": exp_steps,
            "reason_unknown": row.reason_unknown or None if expected is None else None,
            "ran": ran_mode, "ran_min": min(ran), "ran_max": max(ran),
            "extras": extras,
            "flags": flags,
            "transposes": transposes,
            "transposes_expected": row.transposes,
            "outside": {"per_call": round(out_cnt / n, 3), "us_per_call": round(out_us / n, 3),
                        "names": [nm for nm, _ in out_names.most_common(MAX_NAMES)]},
            "source": row.source,
            "calls_without_forward": apart,
        }
        reading["summary"] = summary(reading) + (f"; {X.NEED_WEIGHTS_FIX}" if weights else "")
        out[key] = reading
    return out


def _evidence(unit: str, ids: list) -> dict[str, list]:
    """The events that earned an extra: kernels by correlation id, or on a CPU trace ops by their start."""
    if unit == "kernels":
        return {"kernel_correlations": [i for i in ids if i is not None], "op_starts_us": []}
    return {"kernel_correlations": [], "op_starts_us": [i for i in ids if i is not None]}


def summary(e: dict[str, Any]) -> str:
    """One line like the post's table: expected N kernels per forward, ran M, and the extras."""
    unit = e["unit"]
    apart = e.get("calls_without_forward") or 0
    if apart and e["ran_max"] == 0:
        return (f"no GPU forward recorded in its {apart} call(s) (cut window or backward only): "
                f"expected {e['expected'] if e['expected'] is not None else '?'} {unit} per forward, ran unknown")
    ran = str(e["ran"]) if e["ran_min"] == e["ran_max"] else f"{e['ran']} (from {e['ran_min']} to {e['ran_max']})"
    if e["expected"] is None:
        head = f"ran {ran} {unit} per forward (no expectation: {e['reason_unknown'] or 'unknown implementation'})"
    else:
        head = f"expected {e['expected']} {unit} per forward, ran {ran}"
    parts = [f"+{_num(x['per_call'])} {x['cause'].replace('_', ' ')}" + (f" ({x['step']})" if x["step"] else "")
             for x in e["extras"]]
    tail = f" ({apart} call(s) with no GPU forward in the trace left out)" if apart else ""
    return head + (": " + ", ".join(parts) if parts else "") + tail


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.2g}"
