"""Finding attention calls in a linked trace, most trusted source first.

1. collector tags (``tb_attn::call {...}`` ranges);
2. attention ops: fused SDPA, and the ops of patterns.ATTENTION_OP_RULES (torch.library / extension
   ops in attention namespaces; custom autograd Functions around a whole attention, when kernels run
   under them); the outermost op of a nest is one call;
3. ``nn.Module: ...Attention...`` scopes (with_stack) and the collector's ``tb_attn::module`` scopes:
   a call found by 1, 2 or 4 widens to the innermost attention module around it, so its projections
   are part of it and the layer gets the module's name (the collector's: its module path); where
   that module's output projection is a module beside it inside an outer attention module that holds
   no other attention (patterns.ATTENTION_OUTPUT_MODULE: ViTAttention = ViTSelfAttention +
   ViTSelfOutput), the call is the outer module: its ops and its name;
4. the eager motif: batched matmul -> softmax -> batched matmul among siblings, shapes agreeing;
5. fused attention kernels that no op explains (graph replay, launches outside the window); the
   helper kernels of such a call (split-KV reduce, quantize, ...) join it (groups.py).

Backward ops and kernels join the call of the forward op their autograd node came from. A backward
node of an attention Function, a backward attention op, or a fused kernel in backward whose forward
is in no call (it ran before the window) is a backward-only call of its own: all the kernels under
its op belong to it.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import compress
from typing import Any

import msgspec
import numpy as np

from ..format import tags
from ..table import columns
from ..trace.events import MODULE_PREFIX
from ..trace.link import WRAPPER_PREFIX, Kernel, Linked, module_name
from . import groups, kernel_path, op_roles
from . import patterns as P
from . import shapes

INSTANCE_SUFFIX = re.compile(r"_\d+$")
MOTIF_REACH = 8  # siblings searched on each side of a softmax for its matmuls


class Call(msgspec.Struct):
    id: int
    lo: int  # forward ops of the call: the contiguous range [lo, hi) of Linked's op columns
    hi: int
    root: int  # op that names the call (-1 for kernel-only calls)
    layer: str
    layer_type: str
    source: str  # tag | op | module | motif | kernel
    implementation: str = "eager"
    backend: str = ""
    compiled: bool = False
    step: int = -1
    start: float = 0.0
    end: float = 0.0
    info: dict[str, Any] = msgspec.field(default_factory=dict)  # shape, dtype, causal, dropout, mask
    kernels: list[Kernel] = msgspec.field(default_factory=list)  # kernel-only calls
    kernel_stages: list[tuple[str, bool]] = msgspec.field(default_factory=list)  # per kernel (stage, in backward) where no op says: calls from kernels alone
    bwd_nodes: list[int] = msgspec.field(default_factory=list)
    bwd_fused: list[int] = msgspec.field(default_factory=list)  # compiled backward attention ops paired by order


def _class_of(module_event_name: str) -> str:
    """nn.Module: Owlv2Attention_3 -> Owlv2Attention"""
    return INSTANCE_SUFFIX.sub("", module_event_name[len(MODULE_PREFIX):] if module_event_name.startswith(MODULE_PREFIX)
                               else module_event_name)


class Detector:
    def __init__(self, L: Linked):
        self.L = L
        n = len(L.names)
        self.call_of = [-1] * n
        self.calls: list[Call] = []
        self._attn_module = [False] * n
        self._has_gpu = bool(L.kernels)
        self._fused_kernels: list[int] = []  # positions in L.kernels of fused attention kernels (step 5)
        self._enclosing: list[int] | None = None  # filled by _ancestry() on first use
        self._in_compiled: list[bool] | None = None
        self._attn_modules: list[int] = []  # positions of attention modules, and of output-projection
        self._output_modules: list[int] = []  # modules (filled by _ancestry() with _enclosing)
        for i in L.where_name(lambda nm: P.is_attention_module(_class_of(nm))):
            if L.is_module(i):
                self._attn_module[i] = True
        self._scope: dict[int, tuple[str, str]] = {}  # op -> (module path, class) of a collector module scope
        for i in L.where_name(lambda nm: nm.startswith(tags.MODULE_PREFIX)):
            named = tags.parse_module_scope(L.names[i])
            if named is not None:
                self._attn_module[i] = True
                self._scope[i] = named

    # -- helpers -------------------------------------------------------------------------------
    def _ancestry(self) -> None:
        """Per op: the nearest enclosing attention module, and whether a compiled region encloses it
        (or is it). A subtree is a contiguous range of the tree order, so each module (each region)
        fills its range, outer ones first and inner ones (later in the order) over them: the work is
        the ops under those few ops, not a step per op. Walking up from each call instead costs
        calls x depth, which a deep tree with wide fan-out makes quadratic."""
        L = self.L
        n = len(L.names)
        end = L.subtree_end
        enclosing = [-1] * n
        compiled = [False] * n
        for i in L.where_name(P.COMPILED_REGION.match):
            compiled[i:end[i]] = [True] * (end[i] - i)
        for i in compress(range(n), self._attn_module):
            enclosing[i + 1:end[i]] = [i] * (end[i] - i - 1)
        self._enclosing, self._in_compiled = enclosing, compiled
        self._attn_modules = list(compress(range(n), self._attn_module))
        self._output_modules = [i for i in L.where_name(lambda nm: P.is_attention_output_module(_class_of(nm)))
                                if L.is_module(i)]

    def _scope_of(self, m: int) -> int:
        """The module whose ops are the call of attention module m: the outermost attention module
        around m that holds no attention module beside m's own and holds an output-projection module
        (patterns.ATTENTION_OUTPUT_MODULE) beside m; m itself where none does (T5LayerSelfAttention
        around T5Attention adds a norm and a residual, not the projection: T5Attention has its own)."""
        end, att, out = self.L.subtree_end, self._attn_modules, self._output_modules
        enclosing = self._enclosing or []  # filled: m came from _enclosing_attention_module
        inner = bisect_right(att, end[m] - 1) - bisect_left(att, m)  # attention modules in m's subtree, m too
        best, p = m, enclosing[m]
        while p >= 0 and bisect_right(att, end[p] - 1) - bisect_left(att, p + 1) == inner:
            # p holds only m's chain; an output module in p outside m's subtree makes p the scope
            if bisect_left(out, m) - bisect_left(out, p) + bisect_right(out, end[p] - 1) - bisect_left(out, end[m]) > 0:
                best = p
            inner += 1
            p = enclosing[p]
        return best

    def _enclosing_attention_module(self, i: int) -> int:
        if self._enclosing is None:
            self._ancestry()
        return self._enclosing[i]

    def _prev_sibling(self, i: int) -> int:
        L = self.L
        p = L.parent[i]
        j = i - 1
        while j >= 0 and L.parent[j] != p:
            j = L.parent[j]
        if j < 0 or j == p:
            return -1
        return j if p >= 0 or self._same_thread(i, j) else -1

    def _next_sibling(self, i: int) -> int:
        L = self.L
        j = L.subtree_end[i]
        if j >= len(L.names) or L.parent[j] != L.parent[i]:
            return -1
        return j if L.parent[i] >= 0 or self._same_thread(i, j) else -1

    def _same_thread(self, i: int, j: int) -> bool:
        return self.L.thread[i] == self.L.thread[j]

    def _compiled(self, i: int) -> bool:
        if self._in_compiled is None:
            self._ancestry()
        return self._in_compiled[i]

    def _new_call(self, lo: int, hi: int, root: int, source: str, layer: str | None = None) -> Call | None:
        # Widen to the innermost attention module's scope, unless it already belongs to another call.
        m = self._enclosing_attention_module(lo)
        w = self._scope_of(m) if m >= 0 else -1
        if w >= 0 and self.call_of[w] < 0:
            lo, hi = w, self.L.subtree_end[w]
            if source != "tag":
                root = w
        mine = self.call_of[lo:hi]
        if mine and max(mine) >= 0 and any(c >= 0 and nd < 0 for c, nd in zip(mine, self.L.node_of[lo:hi])):
            return None  # overlaps an earlier call (e.g. two SDPA ops in one module): join it
        scope = self._scope.get(w)
        if layer is None:
            layer = scope[0] if scope else module_name(self.L.names[w]) if w >= 0 else ""
        layer_type = scope[1] if scope else _class_of(self.L.names[w]) if w >= 0 else ""
        c = Call(id=len(self.calls), lo=lo, hi=hi, root=root, layer=layer, layer_type=layer_type, source=source,
                 step=self.L.step[lo], start=self.L.ts[lo], end=self.L.ts[lo] + self.L.dur[lo])
        c.compiled = self._compiled(lo)
        self.calls.append(c)
        cid = c.id
        # Its ops join it, but those of an earlier call (its backward ops) stay there.
        self.call_of[lo:hi] = [cid] * (hi - lo) if not mine or max(mine) < 0 else [x if x >= 0 else cid for x in mine]
        return c

    # -- the sources, in order of trust ---------------------------------------------------------
    def run(self) -> list[Call]:
        L = self.L
        names = L.names
        fwd = L.node_of
        # 1. tags (each pass visits only the ops whose name can match, in op order)
        for i in L.where_name(lambda nm: nm.startswith(tags.CALL_PREFIX)):
            if L.cat(i) == "user_annotation" and fwd[i] < 0 and self.call_of[i] < 0:
                tag = tags.parse_call(names[i])
                if tag is None:
                    continue
                c = self._new_call(i, L.subtree_end[i], i, "tag", layer=str(tag.get("layer") or ""))
                if c is not None:
                    c.info.update(shapes.from_tag(tag))
                    c.info["tag"] = tag
                    if tag.get("compiled"):
                        c.compiled = True
        # 2. attention ops and attention Functions, outermost first (positions ascend: parents first)
        for i in L.where_name(_names_attention):
            if fwd[i] >= 0 or self.call_of[i] >= 0:
                continue
            rule = P.attention_function(names[i])
            if rule is not None and not (L.cpu[i] and self._does_work(i)):
                continue
            c = self._new_call(i, L.subtree_end[i], i, "op")
            if c is not None and rule is not None and not c.layer_type:
                c.layer_type = names[i]
        # 4. eager motif (3. happens inside _new_call)
        for i in L.where_name(self._is_softmax):
            if fwd[i] >= 0 or self.call_of[i] >= 0:
                continue
            if not self._is_softmax(names[L.parent[i]] if L.parent[i] >= 0 else ""):
                self._motif(i)
        # 4b. the same path through a softmax written out: max, sub, exp, sum, div
        for i in L.where_name(P.WRITTEN_SOFTMAX_EXP.__contains__):
            if fwd[i] >= 0 or self.call_of[i] >= 0:
                continue
            written = self._written_softmax(i)
            if written is not None:
                self._motif(i, written)
        # 5. fused kernels that no call explains (only the kernels of fused names are visited)
        kn = L.kernel_names
        self._fused_kernels = sorted(columns.where(kn.values, columns.positions(kn.ids, len(kn.values)),
                                                   lambda nm: P.fused_family(nm) is not None))
        early = L.before_window.kernels if L.before_window is not None else None
        for ki in self._fused_kernels:
            k = L.kernels[ki]
            op = k.op
            if early is not None and early[ki]:
                continue  # from before the window (trace/window.py): listed apart, no call of the window
            if op >= 0:
                if self.call_of[op] >= 0:
                    continue
                if fwd[op] >= 0:
                    continue  # backward: joins its forward's call, or becomes a backward-only call

                self._new_call(op, L.subtree_end[op], op, "kernel")
            else:
                c = Call(id=len(self.calls), lo=0, hi=0, root=-1, layer="", layer_type="", source="kernel",
                         step=self._step_at(k.ts), start=k.ts, end=k.ts + k.dur)
                c.kernels.append(k)
                self.calls.append(c)
        groups.attach_helpers(self.L, self.calls, self.call_of)  # quantize, KV write, split-KV reduce kernels join their call
        self._match_graph_replay()
        self._kernel_path_calls()
        self._propagate_backward()
        self._pair_compiled_backward()
        self._backward_only_calls()
        return self.calls

    def _kernel_path_calls(self) -> None:
        """6. eager attention that no op launched, from the kernel sequence on each stream
        (kernel_path.py): lower confidence, named so in the report."""
        L = self.L
        if not L.kernels:
            return
        # kernels from before the window are no call of it (trace/window.py): the report lists them apart
        claimed = L.before_window.kernels.copy() if L.before_window is not None else np.zeros(len(L.kernels), bool)
        for c in self.calls:
            for k in c.kernels:
                claimed[k.i] = True
        for kc in kernel_path.find(L, claimed):
            ks = [L.kernels[i] for i in kc.kernels]
            t0, t1 = min(k.ts for k in ks), max(k.ts + k.dur for k in ks)
            c = Call(id=len(self.calls), lo=0, hi=0, root=-1, layer="", layer_type="", source="kernel",
                     step=self._step_at(t0), start=t0, end=t1, kernels=ks, kernel_stages=kc.stages)
            c.info["from_kernels"] = True
            if all(b for _, b in kc.stages):
                c.info["backward_only"] = True
            self.calls.append(c)

    def _does_work(self, i: int) -> bool:
        """Kernels run under op ``i`` (on a trace without kernels, the CPU did the work: always)."""
        if not self._has_gpu:
            return True
        launches = self.L.launches_self
        return any(launches[j] for j in range(i, self.L.subtree_end[i]))

    def _backward_only_calls(self) -> None:
        """Backward work whose forward is in no call (it ran before the profiled window, or autograd
        linked it elsewhere) is a call of its own: the backward node of an attention Function, then a
        backward attention op (torch.library), then the op launching a fused attention kernel."""
        L = self.L
        node_of = L.node_of
        for i in L.where_name(lambda nm: P.attention_function_backward(nm) is not None):
            if node_of[i] != i or self.call_of[i] >= 0 or not L.cpu[i] or not self._does_work(i):
                continue
            f = L.fwd_of.get(i)
            c = self._call_under(f) if f is not None else -1
            if c >= 0:  # the Function's forward is no call, but a call was found inside it (a tag, the motif)
                self.calls[c].bwd_nodes.append(i)
                hi = L.subtree_end[i]
                self.call_of[i:hi] = [c if x < 0 else x for x in self.call_of[i:hi]]
            else:
                self._backward_call(i)
        for i in L.where_name(P.is_vendor_op):
            if node_of[i] >= 0 and self.call_of[i] < 0:
                self._backward_call(i)
        for ki in self._fused_kernels:
            op = L.kernels[ki].op
            if op >= 0 and node_of[op] >= 0 and self.call_of[op] < 0:
                self._backward_call(op)

    def _call_under(self, f: int) -> int:
        """The call of op ``f`` or of the first op under it that is in one, or -1."""
        for j in range(f, self.L.subtree_end[f]):
            if self.call_of[j] >= 0:
                return self.call_of[j]
        return -1

    def _backward_call(self, i: int) -> Call:
        L = self.L
        hi = L.subtree_end[i]
        name, t0, d = L.names[i], L.ts[i], L.dur[i]
        p = L.parent[i]
        if L.node_of[i] == i and p >= 0 and L.names[p].startswith(WRAPPER_PREFIX):
            i, hi = p, max(hi, L.subtree_end[p])  # autograd's evaluate_function wrapper around the node
        step = L.step[i] if L.step[i] >= 0 else self._step_at(t0)
        fn = P.attention_function_backward(name)
        c = Call(id=len(self.calls), lo=i, hi=hi, root=i, layer="", source="op" if fn else "kernel",
                 layer_type=P.BACKWARD_NODE_SUFFIX.sub("", name) if fn else "", step=step,
                 start=t0, end=t0 + d)
        c.info["backward_only"] = True
        self.calls.append(c)
        self.call_of[i:hi] = [c.id if x < 0 else x for x in self.call_of[i:hi]]
        return c

    def _match_graph_replay(self) -> None:
        """A CUDA/HIP graph records its ops once at capture and replays their kernels later, with no
        link between the two. When the captured attention calls that got no fused kernel and the
        replayed fused kernels agree in number, pair them in time order; otherwise keep the kernels
        as calls of their own (counted once either way)."""
        L = self.L
        replayed = [c for c in self.calls if c.source == "kernel" and c.kernels and c.kernels[0].graph]
        if not replayed:
            return
        has_fused = set()
        for k in L.kernels:
            if k.op >= 0 and self.call_of[k.op] >= 0 and P.fused_family(k.name) is not None:
                has_fused.add(self.call_of[k.op])
        waiting = [c for c in self.calls if c.source != "kernel" and c.id not in has_fused
                   and any(P.attention_op(L.names[j]) for j in range(c.lo, c.hi))]
        if len(waiting) != len(replayed):
            return
        waiting.sort(key=lambda c: c.start)
        replayed.sort(key=lambda c: c.start)
        for c, r in zip(waiting, replayed):
            c.kernels.extend(r.kernels)
            c.info["graph_replay"] = True
        gone = {r.id for r in replayed}
        keep = [c for c in self.calls if c.id not in gone]
        remap = {c.id: new for new, c in enumerate(keep)}
        for c in keep:
            c.id = remap[c.id]
        self.call_of = [remap.get(x, -1) if x >= 0 else -1 for x in self.call_of]
        self.calls = keep

    @staticmethod
    @lru_cache(maxsize=65536)
    def _is_softmax(name: str) -> bool:
        if name in P.SOFTMAX_OPS:
            return True
        return name.startswith("triton_") and "_softmax" in name and "log_softmax" not in name

    def _is_bmm(self, i: int) -> bool:
        """A matmul-like op (op_roles.OP_ROLES) with batch dims; a 2-D one (heads flattened into rows)
        only inside an attention module, where the scope is the evidence a classifier lacks."""
        L = self.L
        if L.names[i] not in op_roles.ROLES:
            return False
        if op_roles.batched(L, i):
            return True
        p = L.parent[i]
        return p >= 0 and self._attn_module[p] and op_roles.product_at(L, i) is not None

    def _nearest_bmm(self, s: int, step, reach: int) -> int:
        """The first batched matmul among the siblings of ``s`` in one direction, or -1."""
        j = s
        for _ in range(reach):
            j = step(j)
            if j < 0:
                return -1
            if self._is_bmm(j):
                return j
        return -1

    def _motif(self, s: int, written: list[int] | None = None) -> None:
        """The score path around the softmax ``s``: the nearest batched matmul before it must output
        the score [.., Lq, Lk] and the nearest after it contract over Lk. ``written``: the ops of a
        softmax written out (max, sub, exp, sum, div), ``s`` being its exp."""
        L = self.L
        # Inside an attention module every sibling is fair game (T5 computes its position bias
        # between QK^T and softmax); elsewhere stay close, so unrelated matmuls never pair up.
        p = L.parent[s]
        reach = len(L.names) if p >= 0 and self._attn_module[p] else MOTIF_REACH
        qk = self._nearest_bmm(written[0] if written else s, self._prev_sibling, reach)
        if qk < 0:
            return
        av = self._nearest_bmm(written[-1] if written else s, self._next_sibling, reach)
        if av < 0 or not self._shapes_agree(qk, s, av):
            return
        c = self._new_call(qk, L.subtree_end[av], -1, "motif")
        if c is None:
            return
        if c.root < 0:
            c.root = qk
        ops, sa = op_roles.operands(L, qk), L.args(s)
        info = shapes.from_matmuls(ops[0] if ops else None, sa.dims if sa else None, ops[1] if ops else None)
        c.info.update(info)
        c.info["_softmax"] = s
        if not op_roles.batched(L, qk):
            c.info["_flat_heads"] = True  # 2-D QKᵀ (a per-head loop): the stages read 2-D matmuls as QKᵀ/AV
        if written:
            c.info["_written_softmax"] = written
        if info.get("shape") is None or info["shape"].get("q_len") is None:
            pq = op_roles.product_at(L, qk)
            if pq is not None:
                shape = shapes.make_shape(None, None, None, pq.m, pq.n, pq.k)
                shape["batch_heads"] = pq.left_batch
                c.info["shape"] = shape

    def _written_softmax(self, e: int) -> list[int] | None:
        """The siblings of ``exp`` op ``e`` that make a softmax written out: the max and subtraction
        before it, the sum and division (or reciprocal and product) after it; None without a sum and
        a normalising op after it."""
        L = self.L
        before, j = [], e
        while True:
            j = self._prev_sibling(j)
            if j < 0 or L.names[j] not in P.WRITTEN_SOFTMAX_BEFORE:
                break
            before.append(j)
        after, j = [], e
        while True:
            j = self._next_sibling(j)
            if j < 0 or L.names[j] not in P.WRITTEN_SOFTMAX_AFTER:
                break
            after.append(j)
        names = {L.names[j] for j in after}
        if not names & P.WRITTEN_SOFTMAX_SUM or not names & P.WRITTEN_SOFTMAX_NORMALISE:
            return None
        return before[::-1] + [e] + after

    def _shapes_agree(self, qk: int, s: int, av: int) -> bool:
        """QK^T outputs the score [.., Lq, Lk] the softmax reads, and AV contracts over Lk with a
        [.., Lk, D] operand (operand roles from op_roles.OP_ROLES: baddbmm's input is its bias).
        What the trace did not record cannot disagree."""
        L = self.L
        sa = L.args(s)
        sd = sa.dims if sa else None
        score = sd[0] if sd and isinstance(sd[0], list) and len(sd[0]) >= 2 else None
        pq, pa = op_roles.product_at(L, qk), op_roles.product_at(L, av)
        if pq is None and op_roles.recorded(L, qk) or pa is None and op_roles.recorded(L, av):
            return False  # shapes recorded, but no product of two matrices
        lq, lk = (pq.m, pq.n) if pq else (score[-2], score[-1]) if score else (None, None)
        if score and lq is not None and (score[-2], score[-1]) != (lq, lk):
            return False
        if pa is not None and lq is not None and (pa.m, pa.k) != (lq, lk):
            return False
        return True

    def _step_at(self, ts: float) -> int:
        for s, (a, b) in self.L.steps.items():
            if a <= ts <= b:
                return s
        return -1

    def _propagate_backward(self) -> None:
        L = self.L
        call_of = self.call_of
        for node, f in L.fwd_of.items():
            c = call_of[f]
            if c < 0:
                continue
            self.calls[c].bwd_nodes.append(node)
        if not L.fwd_of:
            return  # no backward node has a forward op (inference): nothing to propagate
        node_of = L.node_of
        for i in columns.nonnegative(node_of):  # the ops in backward, found at C speed
            if call_of[i] < 0:
                f = L.fwd_of.get(node_of[i])
                if f is not None:
                    call_of[i] = call_of[f]


    def _pair_compiled_backward(self) -> None:
        """torch.compile runs a whole graph's backward as one autograd node (CompiledFunctionBackward)
        whose forward is the compiled region, not the attention op, so its backward attention ops
        (``aten::_scaled_dot_product_*_backward``) link to no call. Within a step the backward runs
        the layers in reverse: when the counts agree, pair them with the compiled forward calls."""
        L = self.L
        orphans = [i for i in L.where_name(P.is_backward_attention_op)
                   if L.node_of[i] >= 0 and self.call_of[i] < 0
                   and not (L.parent[i] >= 0 and P.is_backward_attention_op(L.names[L.parent[i]]))]
        if not orphans:
            return
        fwd = [c for c in self.calls if c.compiled and not c.bwd_nodes and c.source != "kernel"]
        by_step: dict[int, tuple[list[Call], list[int]]] = {}
        for c in fwd:
            by_step.setdefault(c.step, ([], []))[0].append(c)
        for i in orphans:
            by_step.setdefault(L.step[i], ([], []))[1].append(i)
        for calls, ops in by_step.values():
            if not calls or len(calls) != len(ops):
                continue
            calls.sort(key=lambda c: c.start)
            ops.sort(key=lambda i: L.ts[i], reverse=True)
            for c, i in zip(calls, ops):
                c.bwd_fused.append(i)
                c.bwd_nodes.append(i)
                for j in range(i, L.subtree_end[i]):
                    self.call_of[j] = c.id


@lru_cache(maxsize=65536)
def _names_attention(name: str) -> bool:
    return P.attention_op(name) is not None or P.attention_function(name) is not None


def detect(L: Linked) -> tuple[list[Call], list[int]]:
    d = Detector(L)
    calls = d.run()
    return calls, d.call_of


def members(call_of: list[int]) -> list[int]:
    """The ops that belong to some call, in op order (found at C speed). The passes that only look
    at call ops walk this list, not every op: a part of a trace's ops (under half in BERT-small's)."""
    return columns.nonnegative(call_of)

