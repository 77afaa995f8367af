"""Time and counts per call, stage and pass; what ran in each call (memory: tb_attn_plugin/memory/).

Self time only: an op's CPU self time and the GPU time of the kernels it launched itself, so an SDPA
op and its inner op never count one kernel twice.
"""

from __future__ import annotations

import re
from bisect import bisect_left

import msgspec
import numpy as np

from ..table import columns
from ..trace.link import Linked
from ..table.arrays import Interned, floats, intern, ints
from . import patterns as P
from .detect import Call
from .stages import Stager, kernel_stage

PASSES = ("fwd", "bwd")


class Cell(msgspec.Struct):  # one per call, stage and pass: no per-instance dict
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


class Measured(msgspec.Struct):
    cells: list[dict[tuple[str, str], Cell]]  # per call: (stage, pass) -> Cell
    kernel_rows: dict[tuple[str, str, str, str], list[float]]  # (name, stage, pass, impl) -> [count, gpu_us]
    op_rows: dict[tuple[str, str, str], list[float]]  # (name, stage, pass) -> [count, cpu_us]
    stage_of: list[str | None]
    total_gpu_us: float
    total_cpu_us: float
    step_gpu: dict[int, float]
    step_cpu: dict[int, float]
    # each kernel's call (by its position in Linked.kernels) where a call holds it (kernel-only calls,
    # helper kernels: detect.py, groups.py), else -1
    kernel_call: list[int] = msgspec.field(default_factory=list)
    call_kernels: list[dict[tuple[str, str, str], list[float]]] = msgspec.field(default_factory=list)  # per call
    # those of the ops in some call (member_at) that are cpu ops, in op order (int64: a list of ints
    # would be 28 bytes per op, a few MB of a big trace's peak)
    cpu_members: np.ndarray = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    # Each op's (call, stage or "other", in backward) as an id into slot_keys, -1 outside calls
    # (columns.keyed): the key the cells, the memory spans and attribution group by.
    slot: np.ndarray = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))
    slot_keys: list[tuple[int, str, bool]] = msgspec.field(default_factory=list)
    member_at: np.ndarray = msgspec.field(default_factory=lambda: np.zeros(0, np.int64))  # the ops in some call, in op order

    @property
    def members(self) -> list[int]:
        """The ops in some call, in op order (detect.members), as a list."""
        return self.member_at.tolist()


def measure(L: Linked, calls: list[Call], call_of: list[int]) -> Measured:
    n = len(L.names)
    stage_of: list[str | None] = [None] * n
    stager = Stager(L)
    for c in calls:
        if c.hi > c.lo and not c.info.get("backward_only"):
            stager.classify_call(c, stage_of)
    # Backward ops take their forward op's stage.
    node_of, fwd_of = L.node_of, L.fwd_of
    call_col = np.fromiter(call_of, np.int64, n)  # as a column: the groupings below gather it at C speed
    in_at = np.flatnonzero(call_col >= 0)  # the ops in some call (detect.members), in op order
    for i in in_at[L.bwd_column[in_at]].tolist():
        f = fwd_of.get(node_of[i])
        stage_of[i] = stage_of[f] if f is not None and stage_of[f] is not None else "other"

    # Where the forward op says nothing of its backward (an attention Function's node; a backward-only
    # call), the ops under the node decide, in backward order.
    for c in calls:
        if c.info.get("backward_only"):
            stager.classify_range(c.lo, c.hi, stage_of, backward=True)
            continue
        for node in c.bwd_nodes:
            f = fwd_of.get(node)
            if f is not None and P.attention_function(L.names[f]) is not None:
                stager.classify_range(node, L.subtree_end[node], stage_of, backward=True)

    for c in calls:
        for i in c.bwd_fused:
            for j in range(i, L.subtree_end[i]):
                stage_of[j] = "fused"

    # CPU self time: per step over all cpu ops, per cell and per op name over those in calls. Summed
    # per group in op order (table/columns.py), as one loop over the ops would.
    cells: list[dict[tuple[str, str], Cell]] = [dict() for _ in calls]
    self_cpu, step = L.self_cpu, L.step
    is_cpu = L.cpu
    total_cpu, step_cpu = columns.masked_sums(is_cpu, step, self_cpu)
    cpu_members = in_at[np.frombuffer(bytes(is_cpu), np.uint8)[in_at] != 0] if n else np.zeros(0, np.int64)
    slot, slot_keys = columns.keyed(in_at, (call_col, stage_of, L.bwd_column), "other", n)
    for k, (n_ops, s) in columns.sums(cpu_members, (slot,), None, self_cpu).items():
        c, st, b = slot_keys[k]
        cells[c][(st, "bwd" if b else "fwd")] = Cell(cpu_us=s, ops=n_ops)
    stage_pass = intern([(st, b) for _, st, b in slot_keys])  # each slot's (stage, in backward) as an id
    op_rows = _op_rows(L, cpu_members, slot, stage_pass)

    kernel_call = [-1] * len(L.kernels)
    for c in calls:
        for k in c.kernels:
            kernel_call[k.i] = c.id
    kernel_rows, total_gpu, step_gpu, fused_seen, call_kernels = _kernel_sums(L, calls, slot, slot_keys, stage_pass,
                                                                             kernel_call, cells)

    attention_ops = L.where_name(_is_attention_op)  # few per call: each call bisects its own
    for c in calls:
        _settle_implementation(L, c, fused_seen[c.id], attention_ops)
    return Measured(cells, kernel_rows, op_rows, stage_of, total_gpu, total_cpu, step_gpu, step_cpu, kernel_call,
                    call_kernels, cpu_members, slot, slot_keys, in_at)


def _kernel_sums(L: Linked, calls: list[Call], slot: np.ndarray, slot_keys: list[tuple[int, str, bool]],
                 stage_pass: Interned, kernel_call: list[int], cells: list[dict[tuple[str, str], Cell]]):
    """GPU time in kernel order, from the kernel columns: (kernel rows, total, per step, per call the
    fused kernels' time by implementation, per call its kernel rows); each call's cells get their
    kernels. A kernel's place (stage, pass, implementation) is decided once per distinct (op stage,
    pass, kernel name), not per kernel; every sum is a grouped one (table/columns.py: each group's
    values added in kernel order from 0.0, groups in order of their first kernel, as a loop over the
    kernels adds and inserts them)."""
    kop, kdur, names = L.kernel_op, L.kernel_dur, L.kernel_names
    op = ints(kop)
    # each kernel's step: its op's, -1 where it has none (op -1 reads the appended -1)
    total_gpu, step_gpu = columns.masked_sums(b"\x01" * len(kop), np.append(ints(L.step), -1)[op], kdur)
    kernel_rows: dict[tuple[str, str, str, str], list[float]] = {}
    fused_seen: list[dict[str, float]] = [dict() for _ in calls]
    call_kernels: list[dict[tuple[str, str, str], list[float]]] = [dict() for _ in calls]
    if not len(op):
        return kernel_rows, total_gpu, step_gpu, fused_seen, call_kernels
    # Each kernel's slot: its op's (call, stage, pass), -1 where its op is in no call (or it has none);
    # its call: the slot's, else the call holding it (kernel-only calls, helper kernels whose own op
    # is in no call: groups.py), else none.
    s = np.append(slot, -1)[op]
    slot_call = np.array([c for c, _, _ in slot_keys] + [-1], np.int64)
    call = np.where(s >= 0, slot_call[s], np.asarray(kernel_call, np.int64))
    rows = np.flatnonzero(call >= 0)
    s, o, call = s[rows], op[rows], call[rows]
    launched = (s >= 0) | (o >= 0)
    # A place's key: (the slot's stage-pass id, name id), or past the stage-pass ids (no op of the
    # call launched it) whether its op runs in backward, and the name id.
    n_sp = len(stage_pass.values)
    bwd = np.append(L.bwd_column, False)[o]
    sp = np.where(s >= 0, np.append(stage_pass.ids, -1)[s], n_sp + bwd)
    # Calls found from kernels alone say each kernel's (stage, pass) themselves: past n_sp + 1.
    said: dict[tuple[str, bool], int] = {}
    if any(c.kernel_stages for c in calls):
        at = {int(r): k for k, r in enumerate(rows.tolist())}
        for c in calls:
            for k, st in zip(c.kernels, c.kernel_stages):
                r = at.get(k.i)
                if r is not None and s[r] < 0 and o[r] < 0:
                    sp[r] = n_sp + 2 + said.setdefault(st, len(said))
    said_keys = list(said)
    place_of, place_keys = columns.factorize(range(len(rows)), (sp, names.ids[rows]))
    places = [_kernel_place(stage_pass.values[p][0], names.values[nm], stage_pass.values[p][1]) if p < n_sp
              else _kernel_place(None, names.values[nm], p > n_sp) if p < n_sp + 2
              else _kernel_place(*said_keys[p - n_sp - 2][:1], names.values[nm], said_keys[p - n_sp - 2][1])
              for p, nm in place_keys]
    d = floats(kdur)[rows]

    def grouped(key_of_place: list, with_call: bool):
        """(groups' keys in order of their first kernel, counts, sums of d) by the places' key (and call)."""
        ids = intern(key_of_place)
        cols = (call, ids.ids[place_of]) if with_call else (ids.ids[place_of],)
        gid, keys = columns.factorize(range(len(rows)), cols)
        return keys, ids.values, np.bincount(gid, minlength=len(keys)), np.bincount(gid, weights=d, minlength=len(keys)), gid

    keys, values, n, us, gid = grouped([p[0] for p in places], True)
    fired = np.bincount(gid, weights=launched, minlength=len(keys))
    for (c, k), count, total, fires in zip(keys, n.tolist(), us.tolist(), fired.tolist()):
        cell = cells[c].get(values[k])
        if cell is None:
            cell = cells[c][values[k]] = Cell()
        cell.gpu_us += total
        cell.kernels += int(count)
        cell.launches += int(fires)
    keys, values, n, us, _ = grouped([p[1] for p in places], False)
    for k, count, total in zip(keys, n.tolist(), us.tolist()):
        kernel_rows[values[k]] = [int(count), total]
    keys, values, n, us, _ = grouped([p[2] for p in places], True)
    for (c, k), count, total in zip(keys, n.tolist(), us.tolist()):
        call_kernels[c][values[k]] = [int(count), total]
    fused = np.array([p[3] for p in places], bool)[place_of]
    if fused.any():
        impl = intern([p[1][3] for p in places])
        gid, keys = columns.factorize(np.flatnonzero(fused).tolist(), (call, impl.ids[place_of]))
        for (c, k), total in zip(keys, np.bincount(gid, weights=d[fused], minlength=len(keys)).tolist()):
            fused_seen[c][impl.values[k]] = total
    return kernel_rows, total_gpu, step_gpu, fused_seen, call_kernels


def _kernel_place(op_stage: str | None, name: str, bwd: bool) -> tuple[tuple[str, str], tuple, tuple, bool]:
    """((stage, pass), its kernel row's key (name, stage, pass, implementation), its call's row key
    (name, stage, pass), whether a fused family named it) of a kernel whose op has stage
    ``op_stage`` (None: no op of its call launched it) and runs in backward (``bwd``)."""
    if op_stage is None:
        fam = P.kernel_family(name)
        stage = fam.stage if fam is not None and fam.stage in P.HELPER_STAGES else "fused"
        ps = fam.pass_ if fam is not None and fam.pass_ else ("bwd" if bwd else "fwd")
    else:
        stage, ps = kernel_stage(op_stage, name), "bwd" if bwd else "fwd"
    fam = P.fused_family(name) if stage == "fused" else None
    impl = fam.implementation if fam is not None else ""
    return (stage, ps), (name, stage, ps, impl), (name, stage, ps), fam is not None


def _op_rows(L: Linked, rows: list[int], slot: np.ndarray, stage_pass: Interned
             ) -> dict[tuple[str, str, str], list[float]]:
    """(op name, stage, pass) -> [count, self time] over ``rows``, keys as columns.sums makes them (an
    empty name reads "other"), grouped on the name ids and the slots' (stage, pass) ids."""
    ids, values = L.name_codes()
    named = intern(["other" if v is None or v == "" else v for v in values])
    of_slot = np.append(stage_pass.ids, -1)  # slot -1 (no call) reads -1
    got = columns.sums(rows, (named.ids[ids], of_slot[slot]), None, L.self_cpu)
    return {(named.values[nm], *_stage_pass(stage_pass.values[sp])): v for (nm, sp), v in got.items()}


def _stage_pass(key: tuple[str, bool]) -> tuple[str, str]:
    return key[0], "bwd" if key[1] else "fwd"


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
            deepest, depth = P.attention_op(L.names[j]), L.depth[j]
    backend = (deepest[1] if deepest else "") or str(tag.get("backend") or "")
    if fused:
        impl = max(fused, key=fused.get)
    elif deepest is not None and deepest[0] != "sdpa":
        impl = deepest[0]
    elif deepest is not None:
        impl = str(tag.get("backend") or "sdpa")
    elif c.compiled and any(L.names[j].startswith("triton_") for j in range(c.lo, c.hi)):
        impl = "compiled"
    elif c.info.get("from_kernels"):
        impl = "eager"  # GEMM, softmax, GEMM kernels (attention/kernel_path.py)
    elif c.source == "kernel" and c.kernels:
        fam = P.fused_family(c.kernels[0].name)
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
