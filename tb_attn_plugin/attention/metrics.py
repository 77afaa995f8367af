"""Time and counts per call, stage and pass; what ran in each call (memory: tb_attn_plugin/memory/).

Self time only: an op's CPU self time and the GPU time of the kernels it launched itself, so an SDPA
op and its inner op never count one kernel twice.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import compress

from ..trace import columns
from ..trace.link import Linked
from . import patterns as P
from .detect import Call, members
from .stages import classify_call, classify_range, kernel_stage

PASSES = ("fwd", "bwd")


@dataclass
class Cell:
    gpu_us: float = 0.0
    cpu_us: float = 0.0
    kernels: int = 0
    launches: int = 0
    ops: int = 0  # cpu ops (roofline/timing.py: each pays its dispatch)

    def add(self, other: "Cell") -> None:
        self.gpu_us += other.gpu_us
        self.cpu_us += other.cpu_us
        self.kernels += other.kernels
        self.launches += other.launches
        self.ops += other.ops


@dataclass
class Measured:
    cells: list[dict[tuple[str, str], Cell]]  # per call: (stage, pass) -> Cell
    kernel_rows: dict[tuple[str, str, str, str], list[float]]  # (name, stage, pass, impl) -> [count, gpu_us]
    op_rows: dict[tuple[str, str, str], list[float]]  # (name, stage, pass) -> [count, cpu_us]
    stage_of: list[str | None]
    total_gpu_us: float
    total_cpu_us: float
    step_gpu: dict[int, float]
    step_cpu: dict[int, float]
    kernel_call: dict[int, int] = field(default_factory=dict)  # id(kernel) -> call for kernel-only calls
    call_kernels: list[dict[tuple[str, str, str], list[float]]] = field(default_factory=list)  # per call
    members: list[int] = field(default_factory=list)  # the ops in some call, in op order (detect.members)
    cpu_members: list[int] = field(default_factory=list)  # those of them that are cpu ops


def measure(L: Linked, calls: list[Call], call_of: list[int]) -> Measured:
    ops = L.ops
    n = len(ops)
    stage_of: list[str | None] = [None] * n
    for c in calls:
        if c.hi > c.lo and not c.info.get("backward_only"):
            classify_call(L, c, stage_of)
    # Backward ops take their forward op's stage.
    node_of, fwd_of, bwd = L.node_of, L.fwd_of, L.bwd
    in_calls = members(call_of)
    for i in compress(in_calls, map(bwd.__getitem__, in_calls)):
        f = fwd_of.get(node_of[i])
        stage_of[i] = stage_of[f] if f is not None and stage_of[f] is not None else "other"

    # Where the forward op says nothing of its backward (an attention Function's node; a backward-only
    # call), the ops under the node decide, in backward order.
    for c in calls:
        if c.info.get("backward_only"):
            classify_range(L, c.lo, c.hi, stage_of, backward=True)
            continue
        for node in c.bwd_nodes:
            f = fwd_of.get(node)
            if f is not None and P.attention_function(ops[f].name) is not None:
                classify_range(L, node, L.subtree_end[node], stage_of, backward=True)

    for c in calls:
        for i in c.bwd_fused:
            for j in range(i, L.subtree_end[i]):
                stage_of[j] = "fused"

    # CPU self time: per step over all cpu ops, per cell and per op name over those in calls. Summed
    # per group in op order (trace/columns.py), as one loop over the ops would.
    cells: list[dict[tuple[str, str], Cell]] = [dict() for _ in calls]
    self_cpu, step = L.self_cpu, L.step
    is_cpu = L.cpu
    total_cpu, step_cpu = columns.masked_sums(is_cpu, step, self_cpu)
    cpu_members = list(compress(in_calls, map(is_cpu.__getitem__, in_calls)))
    for (c, st, b), (n, s) in columns.sums(cpu_members, (call_of, stage_of, bwd), "other", self_cpu).items():
        cells[c][(st, "bwd" if b else "fwd")] = Cell(cpu_us=s, ops=n)
    op_rows: dict[tuple[str, str, str], list[float]] = {
        (nm, st, "bwd" if b else "fwd"): got
        for (nm, st, b), got in columns.sums(cpu_members, (L.names, stage_of, bwd), "other", self_cpu).items()}

    kernel_call: dict[int, int] = {}
    for c in calls:
        for k in c.kernels:
            kernel_call[id(k)] = c.id
    kernel_rows: dict[tuple[str, str, str, str], list[float]] = {}
    total_gpu = 0.0
    step_gpu: dict[int, float] = {}
    fused_seen: list[dict[str, float]] = [dict() for _ in calls]
    call_kernels: list[dict[tuple[str, str, str], list[float]]] = [dict() for _ in calls]
    stage_by: dict[tuple[str, str], str] = {}
    for k in L.kernels:
        e = k.ev
        d = e.dur
        total_gpu += d
        op = k.op
        st_n = step[op] if op >= 0 else -1
        step_gpu[st_n] = step_gpu.get(st_n, 0.0) + d
        if op >= 0 and call_of[op] >= 0:
            c = call_of[op]
            sk = (stage_of[op] or "other", e.name)
            stage = stage_by.get(sk)
            if stage is None:
                stage = stage_by[sk] = kernel_stage(*sk)  # few (stage, kernel name) pairs, many kernels
            ps = "bwd" if node_of[op] >= 0 else "fwd"
        else:
            # kernel-only calls, and helper kernels whose own op is in no call (groups.py)
            c = kernel_call.get(id(k), -1)
            if c < 0:
                continue
            fam = P.kernel_family(e.name)
            stage = fam.stage if fam is not None and fam.stage in P.HELPER_STAGES else "fused"
            ps = fam.pass_ if fam is not None and fam.pass_ else ("bwd" if op >= 0 and node_of[op] >= 0 else "fwd")
        key = (stage, ps)
        cell = cells[c].get(key)
        if cell is None:
            cell = cells[c][key] = Cell()
        cell.gpu_us += d
        cell.kernels += 1
        if op >= 0:
            cell.launches += 1
        impl = ""
        if stage == "fused":
            fam = P.fused_family(e.name)
            if fam is not None:
                impl = fam.implementation
                fused_seen[c][impl] = fused_seen[c].get(impl, 0.0) + d
        rk = (e.name, stage, ps, impl)
        row = kernel_rows.get(rk)
        if row is None:
            row = kernel_rows[rk] = [0, 0.0]
        row[0] += 1
        row[1] += d
        ck = call_kernels[c]
        row = ck.get(rk[:3])
        if row is None:
            row = ck[rk[:3]] = [0, 0.0]
        row[0] += 1
        row[1] += d

    attention_ops = L.where_name(_is_attention_op)  # few per call: each call bisects its own
    for c in calls:
        _settle_implementation(L, c, fused_seen[c.id], attention_ops)
    return Measured(cells, kernel_rows, op_rows, stage_of, total_gpu, total_cpu, step_gpu, step_cpu, kernel_call,
                    call_kernels, in_calls, cpu_members)


def _is_attention_op(name: str) -> bool:
    return P.attention_op(name) is not None


def _settle_implementation(L: Linked, c: Call, fused: dict[str, float], attention_ops: list[int]) -> None:
    """What ran: the fused kernel's family first, then the innermost attention op, then the tag.
    ``attention_ops``: the positions (ascending) of the ops that are attention ops."""
    tag = c.info.get("tag") or {}
    deepest, depth = None, -1
    for k in range(bisect_left(attention_ops, c.lo), bisect_left(attention_ops, c.hi)):
        j = attention_ops[k]
        if L.depth[j] > depth:
            deepest, depth = P.attention_op(L.ops[j].name), L.depth[j]
    backend = (deepest[1] if deepest else "") or str(tag.get("backend") or "")
    if fused:
        impl = max(fused, key=fused.get)
    elif deepest is not None and deepest[0] != "sdpa":
        impl = deepest[0]
    elif deepest is not None:
        impl = str(tag.get("backend") or "sdpa")
    elif c.compiled and any(L.ops[j].name.startswith("triton_") for j in range(c.lo, c.hi)):
        impl = "compiled"
    elif c.source == "kernel" and c.kernels:
        fam = P.fused_family(c.kernels[0].ev.name)
        impl = fam.implementation if fam else "fused"
    elif tag.get("impl") and tag.get("impl") not in ("sdpa", "eager", "user") and not str(tag.get("impl")).startswith("hf:"):
        impl = str(tag["impl"])
    else:
        impl = "eager"
    c.implementation = impl
    c.backend = backend


LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")


def layer_type_of_path(path: str) -> str:
    """model.layers.3.self_attn -> model.layers.*.self_attn"""
    return LAYER_INDEX.sub(".*", path)
