"""Attention's allocations in a snapshot without annotations, from their stack frames (memory/frame_rules.py).

An allocation belongs to attention when the outermost of its frames that a rule names attention
or "not attention" is attention; its site (the layer row) is that outermost attention frame (for an
ATen op in C++ frames, the user line that called it; a ``repeat_kv`` joins the call it feeds). Its
stage comes from the op that allocated: the outermost op frame inside the innermost attention
frame (the op the attention code called: ``softmax``, ``linear``), and the innermost op (what
made the bytes: a ``clone`` inside ``matmul`` is a copy, not a score). Within a call, a matmul
before the softmax is QK^T and after it AV (backward: the reverse), as attention/stages.py does
for ops. Backward allocations carry only autograd frames: a node's run belongs to the call whose
forward block the node frees right after it ran (``<Node>::release_variables`` on the free's
stack), in that block's stage; else a node that is attention itself
(``ScaledDotProductEfficientAttentionBackward0``) is attention's, a generic node
(``SoftmaxBackward0``) is attention's when every forward allocation of its op in this snapshot
was inside attention, or when it runs right after a call's linked nodes, before its QK^T's, and
writes a block of a size they wrote (autograd runs a call's nodes back to back), and
"unattributed" otherwise.

A function no rule names is attention when it allocates like attention (memory/structure.py). The
function that called an attention core (not through nn.Module: its module's forward) owns blocks
that are attention's too: projections and rotary before the core, the output projection after.
A call is one invocation: its backward (autograd nodes, or a compiled backward under
``_backward_impl``) joins the forward call it differentiates, as in traces.
"""

from __future__ import annotations

from array import array
from itertools import pairwise

import msgspec
import numpy as np

from . import frame_rules as R
from . import structure
from .attribute import Attribution, Slot
from .rows import EntryRows, text_of
from .section import CUDA_BLOCK

# Ops that write a B·H·Lq·Lk matrix: forward, QK^T and what follows it up to the probabilities;
# backward, the gradients of those (QK^T's backward writes dQ and dK, AV's writes dP and dV: not told apart).
SCORE_STAGES = {"fwd": ("qk_matmul", "scale_mask", "softmax", "dropout"), "bwd": ("scale_mask", "softmax", "dropout")}
OP_STAGE = {"softmax": "softmax", "mask": "scale_mask", "scale": "scale_mask", "dropout": "dropout",
            "copy": "other", "repeat": "other", "exp": "softmax", "reduce": "softmax", "sub": "softmax"}
NODE_STAGE = {"softmax": "softmax", "mask": "scale_mask", "scale": "scale_mask", "dropout": "dropout"}


class StackInfo(msgspec.Struct, frozen=True):
    """What one distinct stack says."""

    site: str | None  # the attention site (layer row), None outside attention
    impl: str | None  # the site rule's value: aten, library, function, GQA, ...
    fused: bool  # the innermost attention frame is an ATen attention op (its kernels allocate, no op below)
    op: str | None  # the op class the attention code called (frame_rules "op" values)
    made_by: str | None  # the innermost op class
    node: str | None  # an autograd node's forward op class ("attention": the node is attention)
    bwd: bool
    gqa: bool  # a repeat_kv-style frame: K/V heads repeated to Q's (calls: also K/V projected to fewer heads)
    node_name: str | None = None  # the autograd node running (SoftmaxBackward0)
    cpp_site: bool = False  # the site is an ATen op's C++ frame, not a Python function
    released: str | None = None  # a free's stack: the node releasing its saved tensors
    encl: tuple | None = None  # the key of the function that called the attention core (its module's forward)
    keys: frozenset = frozenset()  # the keys of the stack's Python frames (memory/structure.py)
    key_lines: tuple = ()  # (key, the line running in that frame) per Python frame, innermost first
    encl_line: int | None = None  # the line of the module's forward that called the core
    line: int | None = None  # the line running in the innermost attention frame (a Python one)


class FrameCall(msgspec.Struct):
    """One attention call found from frames: a run of allocations at one site."""

    id: int
    layer: str
    pass_: str
    impl: str | None
    gqa: bool = False
    score_bytes: int | None = None
    stages: list = msgspec.field(default_factory=list)  # (stage, timeline index, innermost op class, pass)
    seen: set = msgspec.field(default_factory=set)
    nodes: set = msgspec.field(default_factory=set)  # autograd nodes whose runs it holds
    last: str | None = None
    lines: set = msgspec.field(default_factory=set)  # a compiled backward's forward source lines, seen
    line_stage: dict = msgspec.field(default_factory=dict)  # forward: source line -> its stage
    bwd_line: dict = msgspec.field(default_factory=dict)  # compiled backward: event -> forward source line
    last_line: int | None = None
    of: int = -1  # a backward call: the forward call its node released blocks of
    first: int = -1  # timeline index of its first allocation


class FrameAttribution(msgspec.Struct):
    attribution: Attribution
    calls: list[FrameCall]
    summary: dict
    score_events: bytearray  # per timeline event: 1 for a score-matrix block (is_score_allocation)


def _label(frames: list, k: int, shown: str | None) -> str:
    fn, line, name = frames[k]
    if R.PYTHON_FILE.search(fn or ""):
        return f"{fn.rsplit('/', 1)[-1]}:{name}"
    op = R.function_name(str(name))
    op = op.removesuffix("::call").rsplit("::", 1)[-1] or op
    # An ATen op's site is the user line that called it (never a C++ frame).
    return f"{shown} ({op})" if shown and R.PYTHON_FILE.search(shown.split(":", 1)[0]) else op


def read_stack(rows: EntryRows, s: int, shown: str | None, struct: tuple | None = None) -> StackInfo:
    """The meaning of stack ``s`` (innermost first) of ``rows``; ``shown``: the entry's user frame;
    ``struct``: (structure.Stacks, {key: line span} of the functions found by what they allocate,
    the same by loose key: file, name and calling line)."""
    frames = rows.frames
    ids = rows.stacks[s]
    by_pos = [R.match(frames[k][0], str(frames[k][2] or "")) for k in ids]
    chain = struct[0].chain(s) if struct is not None else None
    keys = frozenset(key for _, _, key in chain.py) if chain is not None else frozenset()
    key_lines = tuple((key, frames[k][1]) for _, k, key in chain.py) if chain is not None else ()
    compiled_bwd = any(m is not None and m[0] == R.BACKWARD for m in by_pos)
    if chain is not None and struct[1]:
        for pos, k, key in chain.py:
            # A compiled backward's copy of the forward's frames: known by file, name and calling line.
            span = struct[1].get(key) if not compiled_bwd else struct[2].get(struct[0].loose(key))
            if span is not None and (by_pos[pos] is None or by_pos[pos][0] != R.ATTENTION) and \
                    (type(frames[k][1]) is not int or span[0] <= frames[k][1] <= span[1]):
                by_pos[pos] = (R.ATTENTION, "structure")
    seq = [(k, m, pos) for pos, (k, m) in enumerate(zip(ids, by_pos)) if m is not None]
    outer_att = inner_att = None
    for i in range(len(seq) - 1, -1, -1):  # outermost first
        kind = seq[i][1][0]
        if kind == R.NOT_ATTENTION and outer_att is None:
            break
        if kind == R.ATTENTION:
            if outer_att is None:
                outer_att = i
            inner_att = i
    nodes = [m[1] for _, m, _ in seq if m[0] == R.NODE]
    node = next((v for v in nodes if v == "attention"), nodes[0] if nodes else None)
    bwd = bool(nodes) or any(m[0] == R.BACKWARD for _, m, _ in seq) or (
        outer_att is not None and str(frames[seq[outer_att][0]][2]) == "backward")
    limit = inner_att if inner_att is not None else len(seq)
    ops = [m[1] for _, m, _ in seq[:limit] if m[0] == R.OP and m[1] not in R.GENERIC_OPS]
    site = impl = None
    encl = encl_line = None
    if outer_att is not None:
        k_out, m_out, pos_out = seq[outer_att]
        impl = m_out[1]
        site = _label(frames, k_out, shown) if impl != "structure" else _structure_label(frames, chain, pos_out)
        encl, encl_line = _enclosing(chain, frames, pos_out) if chain is not None else (None, None)
    elif node == "attention":
        site = _label(frames, next(k for k, m, _ in seq if m == (R.NODE, "attention")), shown)
        impl = "aten"
    gqa = any(m == (R.ATTENTION, "GQA") for _, m, _ in seq) or (site is not None and "repeat" in ops)
    fused = inner_att is not None and seq[inner_att][1][1] == "aten"
    names = [R.node_name(str(frames[k][2])) for k, m, _ in seq if m[0] in (R.NODE, R.RELEASE)]
    released = next((R.node_name(str(frames[k][2])) for k, m, _ in seq if m[0] == R.RELEASE), None)
    cpp = site is not None and not R.PYTHON_FILE.search(frames[seq[outer_att][0] if outer_att is not None else
                                                          seq[-1][0]][0] or "")
    line = frames[seq[inner_att][0]][1] if inner_att is not None else None
    return StackInfo(site, impl, fused, ops[-1] if ops else None, ops[0] if ops else None, node, bwd, gqa,
                     node_name=next((x for x in names if x), None) if nodes else None, released=released, cpp_site=cpp,
                     encl=encl, keys=keys, line=line if type(line) is int else None, key_lines=key_lines,
                     encl_line=encl_line if type(encl_line) is int else None)


def _structure_label(frames: list, chain, pos: int) -> str:
    """A function found by what it allocates: its file and name, and the line that called it (every
    function of course code may be ``forward``)."""
    fn, _, name = next(frames[k] for p, k, _ in chain.py if p == pos)
    caller = next((frames[k] for p, k, _ in chain.py if p > pos and not structure.MODULE_CALL.search(frames[k][0])),
                  None)
    where = f" called at {caller[0].rsplit('/', 1)[-1]}:{caller[1]}" if caller else ""
    return f"{fn.rsplit('/', 1)[-1]}:{name}{where}"


def _enclosing(chain, frames: list, pos: int) -> tuple[tuple | None, int | None]:
    """The key of the Python function that called the attention core at stack position ``pos``, and
    the line that called it: the attention module's forward, whose own allocations (projections,
    rotary, K/V repeats, output projection) are attention's too. None where the core is itself a
    module's forward (called through torch/nn/modules/module.py: what calls it is a block, not attention)."""
    outer = [(p, k, key) for p, k, key in chain.py if p > pos]
    if not outer or structure.MODULE_CALL.search(outer[0][2][0]):
        return None, None
    return outer[0][2], frames[outer[0][1]][1]


def attribute(tl, rows: EntryRows, entry_ix: array) -> FrameAttribution:
    """Attribute a snapshot device's timeline by its allocations' stacks."""
    n = len(tl)
    infos: dict[tuple[int, int], StackInfo] = {}  # by (stack, shown frame): an ATen op's site is its caller's line
    shown_text: dict[int, str | None] = {}
    delta, stack_col, frame_col = tl.delta, rows.stack, rows.frame
    stacks = structure.Stacks(rows)
    found = structure.find(stacks, tl, entry_ix)
    struct = (stacks, found, {stacks.loose(k): span for k, span in found.items()})

    def info(i: int) -> StackInfo | None:
        e = entry_ix[i]
        s = stack_col[e] if len(stack_col) else -1
        if s < 0:
            return None
        f = frame_col[e]
        got = infos.get((s, f))
        if got is None:
            if f not in shown_text:
                shown_text[f] = text_of(rows.frames[f]) if f >= 0 else None
            got = infos[s, f] = read_stack(rows, s, shown_text[f], struct)
        return got

    per_event: list[StackInfo | None] = [info(i) for i in range(n)]
    # The attention modules' forwards (what called a core), and the allocations of their own.
    encls = {si.encl for i, si in enumerate(per_event)
             if si is not None and si.site and si.encl is not None and not si.bwd and delta[i] > 0}
    module_of = _modules(per_event, encls, delta)
    # Forward op classes seen inside and outside attention: a generic backward node that no release
    # links is attention's only when its forward op ran inside attention alone.
    fwd_in: dict[str, int] = {}
    fwd_out: dict[str, int] = {}
    for i, si in enumerate(per_event):
        if si is None or si.bwd or si.op is None or delta[i] <= 0:
            continue
        bucket = fwd_in if si.site or i in module_of else fwd_out  # a module's rotary mul is attention's
        bucket[si.op] = bucket.get(si.op, 0) + 1
    sites_fwd = {si.site for i, si in enumerate(per_event) if si is not None and si.site and not si.bwd and delta[i] > 0}
    bwd_site = next(iter(sites_fwd)) if len(sites_fwd) == 1 else "attention (backward)"
    placer = _Placer(n)
    modules = _Modules(placer)
    unattributed = [0, 0]
    no_frames = [0, 0]
    gqa_pending: list[int] = []
    run: list[int] = []  # the current backward node run not placed by its own frames
    run_node = None
    run_linked = run_released = False

    def end_run() -> None:
        """A run no release linked: attention's by its node's kind where that is certain, else unattributed."""
        for k in run if not run_linked else ():
            si = per_event[k]
            if si.site is not None:  # an ATen attention op's backward that no release linked: its own site
                placer.place(k, si.site, _stage(si), "bwd", si, k == run[0])
            elif si.node in KIND_STAGES and fwd_in.get(si.node) and not fwd_out.get(si.node):
                placer.place(k, bwd_site, _stage(si), "bwd", si, k == run[0])
            elif si.node in NODE_STAGE and _continues(placer.cur["bwd"], int(delta[k]), delta):
                # Autograd runs a call's nodes back to back: a node (MulBackward0 of the 1/sqrt(d)
                # scale) between the call's linked nodes and its QK^T's, writing a block of the
                # size they write, is the call's.
                placer.place(k, placer.cur["bwd"].layer, _stage(si), "bwd", si, k == run[0])
            elif si.node in KIND_STAGES:
                unattributed[0] += 1
                unattributed[1] += delta[k]

    for i in range(n):  # record order: the order the allocations were made
        d = delta[i]
        si = per_event[i]
        if d <= 0:
            # A node releasing what it saved: if that was an attention call's forward block, the
            # node's run is that call's backward, in the forward block's stage.
            if si is None or si.released is None or si.released != run_node or not run:
                continue
            run_released = True
            j = tl.pair[i]
            k = placer.slot[j] if 0 <= j < n else -1
            if k >= 0 and placer.slots[k].pass_ == "fwd":
                fwd = placer.slots[k]
                site = placer.calls[fwd.call].layer
                for r in run if not run_linked else ():
                    rs = per_event[r]
                    st = _stage(rs)
                    # The forward block's stage, where it had one (a Div inside a softmax is softmax's).
                    placer.place(r, site, fwd.stage if st in ("other", "scale_mask") and fwd.stage != "other" else st,
                                 "bwd", rs, r == run[0])
                run_linked = True
                if placer.cur["bwd"] is not None:
                    placer.cur["bwd"].of = fwd.call
            continue
        if si is None:
            if len(stack_col) and stack_col[entry_ix[i]] < 0 and frame_col[entry_ix[i]] < 0:
                no_frames[0] += 1
                no_frames[1] += d
            placer.cur["fwd"] = None
            continue
        if not si.bwd and modules.open:
            modules.leave(si.keys)
        if si.site is not None and not (si.bwd and si.cpp_site and si.node_name):
            if not si.bwd and si.impl == "GQA" and not si.cpp_site:
                gqa_pending.append(i)  # K/V repeated for the attention call that follows
                continue
            if gqa_pending:
                for g in gqa_pending:
                    placer.place(g, si.site if not si.bwd else per_event[g].site, "other", "fwd", per_event[g])
                gqa_pending.clear()
            placer.place(i, si.site, _stage(si), "bwd" if si.bwd else "fwd", si)
            if not si.bwd and si.encl is not None:
                modules.core(si.encl, placer.cur["fwd"])
            continue
        if not si.bwd:
            placer.cur["fwd"] = None
            mod = module_of.get(i)
            if mod is not None:
                modules.own(mod, i, si)
            continue
        if si.node_name != run_node or run_released:  # another node, or the same kind run again
            end_run()
            run, run_node, run_linked, run_released = [], si.node_name, False, False
        if si.node_name:
            run.append(i)
    end_run()
    for g in gqa_pending:
        placer.place(g, per_event[g].site, "other", "fwd", per_event[g])
    _score_sizes(placer.calls, delta)
    calls, slot, slots = _join_backward(placer)
    for c in calls:
        c.gqa = c.gqa or _fewer_kv_heads(c, delta)
    score_events = bytearray(n)
    for c in calls:
        for st, i, made, ps in c.stages:
            if is_score_allocation(int(delta[i]), st, made, c.score_bytes, ps):
                score_events[i] = 1
    summary = {"by": "frames", "sites": sorted({c.layer for c in calls}),
               "structure_sites": sorted({c.layer for c in calls if c.impl == "structure"}),
               "unattributed_bwd_allocs": unattributed[0], "unattributed_bwd_bytes": unattributed[1],
               "allocs_without_frames": no_frames[0], "bytes_without_frames": no_frames[1],
               "gqa_calls": sum(1 for c in calls if c.gqa)}
    return FrameAttribution(Attribution(slot, slots), calls, summary, score_events)


KIND_STAGES = set(NODE_STAGE) | {"matmul"}


def _modules(per_event: list, encls: set, delta) -> dict[int, tuple]:
    """Per forward allocation outside any core that runs inside an attention module's forward (a
    function that called a core): that function's key. A key is a file, a name and the callers: two
    functions of one file called from one line share it (course code's ``x + self.attn(self.ln1(x))``
    where both are ``forward``), so the module's own lines are those around the line that called the
    core (structure.span), and an allocation counts where its frame of that key runs one of them."""
    out: dict[int, tuple] = {}
    if not encls:
        return out
    calling: dict[tuple, set] = {}
    seen: dict[tuple, set] = {}
    for i, si in enumerate(per_event):
        if si is None or si.bwd or delta[i] <= 0:
            continue
        if si.site is not None and si.encl in encls:
            calling.setdefault(si.encl, set()).add(si.encl_line)
        for key, line in si.key_lines:
            if key in encls:
                seen.setdefault(key, set()).add(line)
    spans = {k: structure.span(calling.get(k, set()), seen.get(k, set())) for k in encls}
    for i, si in enumerate(per_event):
        if si is None or si.site is not None or si.bwd or delta[i] <= 0:
            continue
        hit = si.keys & encls
        if hit:
            own = [k for k in hit if any(key == k and (type(line) is not int or spans[k][0] <= line <= spans[k][1])
                                         for key, line in si.key_lines)]
            if own:
                out[i] = min(own)
    return out


class _Modules:
    """An attention module's own allocations join the call of the core it called: before the core
    (q/k/v projections, rotary, K/V reshapes) the call it is about to make, after it (the output
    projection) the call it made. A run ends at the first forward allocation outside the module.
    A function that runs several cores in one run (a whole model's forward looping over layers,
    a block calling SDPA inline among its MLP) is no attention module: its blocks are left out."""

    def __init__(self, placer: _Placer):
        self.placer = placer
        self.open: dict[tuple, list] = {}  # key -> [(event, StackInfo) before its core, the core's call, placed]
        self.not_modules: set[tuple] = set()

    def leave(self, keys: frozenset) -> None:
        for k in [k for k in self.open if k not in keys]:
            del self.open[k]

    def core(self, key: tuple, call: FrameCall | None) -> None:
        if key in self.not_modules or call is None:
            return
        st = self.open.setdefault(key, [[], None, []])
        if st[1] is not None and st[1] is not call:
            self._not_a_module(key, st)
            return
        st[1] = call
        for j, si in st[0]:
            self._add(st, j, call, "qkv_proj" if si.op == "linear" else "other", si)
        st[0] = []

    def own(self, key: tuple, i: int, si: StackInfo) -> None:
        if key in self.not_modules:
            return
        st = self.open.setdefault(key, [[], None, []])
        if st[1] is None:
            st[0].append((i, si))
        else:
            self._add(st, i, st[1], "out_proj" if si.op == "linear" else "other", si)

    def _add(self, st: list, i: int, call: FrameCall, stage: str, si: StackInfo) -> None:
        self.placer.add(i, call, stage, "fwd", si.made_by)
        st[2].append((i, call))

    def _not_a_module(self, key: tuple, st: list) -> None:
        self.not_modules.add(key)
        del self.open[key]
        for i, call in st[2]:
            self.placer.slot[i] = -1
            call.stages[:] = [x for x in call.stages if x[1] != i]


def _join_backward(placer: _Placer) -> tuple[list[FrameCall], array, list[Slot]]:
    """One call per invocation, forward and backward together (as in traces): a backward call joins
    the forward call whose saved block its node released, else (autograd runs the graph in reverse)
    the latest forward call before it that none joined yet, of its own layer where there is one.
    A backward whose forward is not in the record stays a call of its own."""
    calls = placer.calls
    taken = {c.of for c in calls if c.pass_ == "bwd" and c.of >= 0}
    into: dict[int, int] = {}
    open_all: list[int] = []  # forward calls in order; the taken ones are dropped from the top as met
    open_layer: dict[str, list[int]] = {}

    def top(stack: list[int]) -> int | None:
        while stack and stack[-1] in taken:
            stack.pop()
        return stack[-1] if stack else None

    for c in sorted(calls, key=lambda c: (c.first, c.id)):
        if c.pass_ == "fwd":
            open_all.append(c.id)
            open_layer.setdefault(c.layer, []).append(c.id)
            continue
        if c.of >= 0:
            into[c.id] = c.of
            continue
        pick = top(open_layer.get(c.layer, []))
        if pick is None:
            pick = top(open_all)
        if pick is not None:
            into[c.id] = pick
            taken.add(pick)
    # Renumber: the calls that stay, in order of their first allocation.
    kept = sorted((c for c in calls if c.id not in into), key=lambda c: (c.first, c.id))
    new_id = {c.id: k for k, c in enumerate(kept)}
    for c in calls:
        if c.id in into:
            f = calls[into[c.id]]
            f.stages.extend(c.stages)
            f.nodes |= c.nodes
            f.gqa = f.gqa or c.gqa
            f.score_bytes = f.score_bytes or c.score_bytes
    for c in kept:
        c.stages.sort(key=lambda st: st[1])
    slots: list[Slot] = []
    ix: dict[Slot, int] = {}
    remap = []
    for sl in placer.slots:
        c = into.get(sl.call, sl.call)
        key = Slot(new_id[c], sl.stage, sl.pass_)
        k = ix.get(key)
        if k is None:
            k = ix[key] = len(slots)
            slots.append(key)
        remap.append(k)
    slot = placer.slot
    if remap != list(range(len(remap))):
        col = np.frombuffer(slot, np.int64) if len(slot) else np.zeros(0, np.int64)
        table = np.append(np.asarray(remap, np.int64), -1)  # index -1: outside attention stays -1
        col[:] = table[col]
    # A compiled backward's block has no op frame: its stage is that of the forward line it differentiates.
    for c in calls:
        f = calls[into.get(c.id, c.id)]
        for i, line in c.bwd_line.items():
            st = f.line_stage.get(line)
            if st is None or st == "other":
                continue
            key = Slot(new_id[f.id], st, "bwd")
            k = ix.get(key)
            if k is None:
                k = ix[key] = len(slots)
                slots.append(key)
            slot[i] = k
            f.stages[:] = [(st if j == i else s0, j, made, ps) for s0, j, made, ps in f.stages]
    for k, c in enumerate(kept):
        c.id = k
    return kept, slot, slots


class _Placer:
    """Events into calls and (call, stage, pass) slots: a matmul before the call's softmax is QK^T
    and after it AV (backward: the reverse); a linear before the core is the QKV projection."""

    def __init__(self, n: int):
        self.calls: list[FrameCall] = []
        self.slot = array("q", [-1]) * n
        self.slots: list[Slot] = []
        self.slot_ix: dict[Slot, int] = {}
        self.cur: dict[str, FrameCall | None] = {"fwd": None, "bwd": None}

    def place(self, i: int, site: str, stage: str, ps: str, si: StackInfo, new_run: bool = False) -> None:
        """``new_run``: the first allocation of a backward node's run (another node instance)."""
        cur = self.cur[ps]
        if cur is not None and cur.layer != site:
            cur = None
        if stage == "matmul" and ps == "bwd" and cur is not None and "qk_matmul" in cur.seen and (
                cur.last != "qk_matmul" or new_run):
            cur = None  # the next call's backward begins with its AV
        if new_run and ps == "bwd" and cur is not None and si.node == "attention" and si.node_name in cur.nodes:
            cur = None  # a fused kernel's backward node again: the next call's
        if ps == "bwd" and cur is not None and si.node_name is None and si.line is not None and \
                si.line in cur.lines and si.line != cur.last_line:
            cur = None  # a compiled backward back at a forward source line it has passed: the next call's
        if stage == "matmul":
            soft = cur is not None and "softmax" in cur.seen
            stage = ("av_matmul" if soft else "qk_matmul") if ps == "fwd" else ("qk_matmul" if soft else "av_matmul")
        elif stage == "linear":
            stage = "out_proj" if cur is not None and cur.seen & {"qk_matmul", "av_matmul", "fused"} else "qkv_proj"
        # The same site again: a second softmax, a forward matmul or projection after something
        # else, or a backward AV after the call's QK^T.
        again = cur is not None and stage in cur.seen and stage != cur.last and (
            stage == "softmax" or (ps == "fwd" and stage in ("qk_matmul", "av_matmul", "qkv_proj")))
        if cur is None or again:
            cur = FrameCall(len(self.calls), site, ps, si.impl)
            self.calls.append(cur)
            if stage == "out_proj":
                stage = "qkv_proj"
        self.cur[ps] = cur
        cur.gqa = cur.gqa or si.gqa
        if si.node_name:
            cur.nodes.add(si.node_name)
        if ps == "bwd" and si.line is not None:
            cur.lines.add(si.line)
            cur.last_line = si.line
            if si.node_name is None and stage == "other":
                cur.bwd_line[i] = si.line
        elif ps == "fwd" and si.line is not None and cur.line_stage.get(si.line) in (None, "other"):
            cur.line_stage[si.line] = stage  # a line's op, not the copy its matmul made first
        cur.seen.add(stage)
        cur.last = stage
        self.add(i, cur, stage, ps, si.made_by)

    def add(self, i: int, cur: FrameCall, stage: str, ps: str, made: str | None) -> None:
        """Event ``i`` into call ``cur``'s (stage, pass) slot."""
        if cur.first < 0 or i < cur.first:
            cur.first = i
        cur.stages.append((stage, i, made, ps))
        key = Slot(cur.id, stage, ps)
        k = self.slot_ix.get(key)
        if k is None:
            k = self.slot_ix[key] = len(self.slots)
            self.slots.append(key)
        self.slot[i] = k


def _stage(si: StackInfo) -> str:
    """The stage before position decides (matmul: QK^T or AV; linear: QKV or output projection)."""
    if si.bwd:
        if si.node in NODE_STAGE:
            return NODE_STAGE[si.node]
        if si.node == "matmul":
            return "matmul"
    op = si.op
    if op == "matmul":
        return "other" if si.made_by == "copy" else "matmul"
    if op == "linear":
        return "linear"
    if op is None:
        return "fused" if si.fused or si.node == "attention" else "other"
    return OP_STAGE.get(op, "other")


def _score_sizes(calls: list[FrameCall], delta) -> None:
    """Each call's score block size from its own allocations: its QK^T output, else its softmax's
    (the same B·H·Lq·Lk matrix; a softmax upcast to float32 is twice the QK^T's bf16)."""
    by_site: dict[str, int] = {}
    for c in calls:
        if c.pass_ != "fwd":
            continue
        for want in ("qk_matmul", "softmax"):
            got = next((int(delta[i]) for st, i, made, _ in c.stages if st == want and made != "copy"), None)
            if got:
                c.score_bytes = got
                by_site[c.layer] = max(by_site.get(c.layer, 0), got)
                break
    widest = max(by_site.values(), default=0)
    for c in calls:
        if c.score_bytes is None:  # a backward call (or a forward one without QK^T or softmax frames)
            c.score_bytes = by_site.get(c.layer) or (widest if c.pass_ == "bwd" else 0) or None


def _continues(cur: FrameCall | None, size: int, delta) -> bool:
    """Whether a backward block of ``size`` continues call ``cur``'s backward: it has not reached its
    QK^T yet and has written blocks of that size."""
    if cur is None or cur.pass_ != "bwd" or "qk_matmul" in cur.seen:
        return False
    return any(ps == "bwd" and int(delta[i]) == size for _, i, _, ps in cur.stages)


def _fewer_kv_heads(c: FrameCall, delta) -> bool:
    """K/V projected to fewer heads than Q (MQA/GQA without a repeat frame: K/V broadcast inside a
    matmul): two consecutive projection outputs of one size, a whole fraction of the first's (Q's).
    Consecutive: LoRA's small lora_A outputs of q and v are not (each follows its own base output)."""
    sizes = [int(delta[i]) for st, i, _, ps in sorted(c.stages, key=lambda x: x[1]) if st == "qkv_proj" and ps == "fwd"]
    if len(sizes) < 3:
        return False
    q = sizes[0]
    return any(a == b_ < q and q % a == 0 for a, b_ in pairwise(sizes[1:]))


def is_score_allocation(size: int, stage: str, made_by: str | None, score: int | None, pass_: str = "fwd") -> bool:
    """A block the score ops made (QK^T, scale, mask, softmax, dropout, forward or backward) of
    the call's score size, or of the same matrix in a dtype twice or half as wide. Never by size
    alone: a Q/K/V copy or an MLP activation of the same size is made by another op."""
    if not score or stage not in SCORE_STAGES[pass_] or made_by == "copy":
        return False
    return any(size == s or size == -(-s // CUDA_BLOCK) * CUDA_BLOCK for s in (score, score * 2, score // 2))
