"""Joins a trace's events into one graph (rules: shared/docs/attention-taxonomy.md, "Linking events").

- op tree: per thread, ops sorted by (start, -duration) nest by time; a subtree is the contiguous
  range ``[i, subtree_end[i])`` of that order, so walking a call's ops needs no child lists;
- kernel -> launch by correlation, over cuda_runtime *and* cuda_driver (and ROCm's hip* launches);
  launch -> innermost enclosing op on its thread; a kernel with no launch in the window falls back to
  its ``External id``; a kernel replayed from a CUDA/HIP graph has no per-kernel op;
- backward node -> forward op by ``fwdbwd`` flows, else by ``Sequence number``;
- ``ProfilerStep#N`` annotations give every op its step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from .events import Event, Events, MODULE_PREFIX

GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.I)
BWD_NODE = re.compile(r"Backward\d*$")
WRAPPER_PREFIX = "autograd::engine::evaluate_function: "
STEP_PREFIX = "ProfilerStep#"


@dataclass
class Kernel:
    ev: Event
    op: int  # index into Linked.ops, -1 when no op is known
    graph: bool  # replayed from a CUDA/HIP graph


@dataclass
class Linked:
    ops: list[Event]
    parent: list[int]
    depth: list[int]
    subtree_end: list[int]
    self_cpu: list[float]
    gpu_self: list[float]  # GPU time of kernels launched directly by the op
    launches_self: list[int]
    step: list[int]  # ProfilerStep number of each op, -1 outside steps
    node_of: list[int]  # backward node enclosing the op (or the wrapper's node), -1 in forward
    fwd_of: dict[int, int]  # backward node index -> forward op index
    kernels: list[Kernel]
    steps: dict[int, tuple[float, float]]  # step -> (start, end) on the host
    unlinked_kernels: int = 0
    graph_kernels: int = 0
    warnings: list[str] = field(default_factory=list)

    def is_module(self, i: int) -> bool:
        return self.ops[i].cat == "python_function"


def _sortable(key: tuple):
    # pids/tids are ints in kineto but strings in some writers; never compare the two kinds
    return (str(key[0]), str(key[1]))


def _by_thread(events: list[Event]) -> dict[tuple, list[Event]]:
    out: defaultdict[tuple, list[Event]] = defaultdict(list)
    for e in events:
        out[(e.pid, e.tid)].append(e)
    return out


def link(ev: Events) -> Linked:
    by_thread = _by_thread(ev.ops)
    launches_by_thread = _by_thread(ev.launches)

    ops: list[Event] = []
    parent: list[int] = []
    subtree_end: list[int] = []
    launch_op: dict[int, int] = {}  # id(launch event) -> op index
    sort_key = lambda e: (e.ts, -e.dur)  # noqa: E731

    for key in sorted(set(by_thread) | set(launches_by_thread), key=_sortable):
        tops = sorted(by_thread.get(key, ()), key=sort_key)
        tl = sorted(launches_by_thread.get(key, ()), key=lambda e: e.ts)
        base = len(ops)
        ops.extend(tops)
        parent.extend([-1] * len(tops))
        subtree_end.extend([0] * len(tops))
        stack: list[int] = []
        ends: list[float] = []
        li, nl = 0, len(tl)
        for k, e in enumerate(tops):
            i = base + k
            ts = e.ts
            while li < nl and tl[li].ts < ts:
                lt = tl[li].ts
                while ends and ends[-1] <= lt:
                    subtree_end[stack.pop()] = i
                    ends.pop()
                launch_op[id(tl[li])] = stack[-1] if stack else -1
                li += 1
            while ends and ends[-1] <= ts:
                subtree_end[stack.pop()] = i
                ends.pop()
            if stack:
                parent[i] = stack[-1]
            stack.append(i)
            ends.append(ts + e.dur)
        while li < nl:
            lt = tl[li].ts
            while ends and ends[-1] <= lt:
                subtree_end[stack.pop()] = len(ops)
                ends.pop()
            launch_op[id(tl[li])] = stack[-1] if stack else -1
            li += 1
        for j in stack:
            subtree_end[j] = len(ops)

    n = len(ops)
    depth = [0] * n
    self_cpu = [e.dur for e in ops]
    for i in range(n):
        p = parent[i]
        if p >= 0:
            depth[i] = depth[p] + 1
            self_cpu[p] -= ops[i].dur
    self_cpu = [s if s > 0 else 0.0 for s in self_cpu]

    # Kernels -> launch -> op.
    by_corr: dict[int, Event] = {}
    for e in ev.launches:
        a = e.args
        if a is not None and a.correlation is not None:
            by_corr[a.correlation] = e
    by_ext: dict[int, int] | None = None
    graph_launch: dict[str, bool] = {}  # launch name -> is a graph launch (few names, many launches)
    gpu_self = [0.0] * n
    launches_self = [0] * n
    kernels: list[Kernel] = []
    unlinked = graph_kernels = 0
    for e in ev.gpu:
        a = e.args
        la = by_corr.get(a.correlation) if a is not None and a.correlation is not None else None
        graph = False
        if la is not None:
            is_graph = graph_launch.get(la.name)
            if is_graph is None:
                is_graph = graph_launch[la.name] = GRAPH_LAUNCH.search(la.name) is not None
            if is_graph:
                op, graph = -1, True
                graph_kernels += 1
            else:
                op = launch_op.get(id(la), -1)
        else:
            op = -1
            if a is not None and a.external_id is not None:
                if by_ext is None:
                    by_ext = {}
                    for i, o in enumerate(ops):
                        oa = o.args
                        if oa is not None and oa.external_id is not None and o.cat == "cpu_op":
                            by_ext.setdefault(oa.external_id, i)
                op = by_ext.get(a.external_id, -1)
            if op < 0:
                unlinked += 1
        if op >= 0:
            gpu_self[op] += e.dur
            launches_self[op] += 1
        kernels.append(Kernel(e, op, graph))

    # Steps: the nearest enclosing ProfilerStep annotation.
    step = [-1] * n
    steps: dict[int, tuple[float, float]] = {}
    for i, e in enumerate(ops):
        p = parent[i]
        if e.name.startswith(STEP_PREFIX):
            try:
                s = int(e.name[len(STEP_PREFIX):])
            except ValueError:
                s = -1
            step[i] = s
            if s >= 0:
                steps[s] = (e.ts, e.ts + e.dur)
        elif p >= 0:
            step[i] = step[p]

    fwd_of, node_of = _link_backward(ops, parent, ev.flows)
    for node, f in fwd_of.items():
        # The autograd thread has no ProfilerStep: a backward node runs in its forward op's step.
        if step[node] < 0:
            s = step[f]
            for j in range(node, subtree_end[node]):
                if step[j] < 0:
                    step[j] = s

    return Linked(
        ops=ops,
        parent=parent,
        depth=depth,
        subtree_end=subtree_end,
        self_cpu=self_cpu,
        gpu_self=gpu_self,
        launches_self=launches_self,
        step=step,
        node_of=node_of,
        fwd_of=fwd_of,
        kernels=kernels,
        steps=steps,
        unlinked_kernels=unlinked,
        graph_kernels=graph_kernels,
    )


def _link_backward(ops: list[Event], parent: list[int], flows: list[Event]):
    n = len(ops)
    is_node = [False] * n
    seq_ops: list[int] = []
    for i, e in enumerate(ops):
        a = e.args
        if a is not None and a.seq is not None:
            seq_ops.append(i)
            if BWD_NODE.search(e.name) and not e.name.startswith(WRAPPER_PREFIX):
                is_node[i] = True

    fwd_of: dict[int, int] = {}
    if flows and seq_ops:
        # A flow starts at the innermost forward op and ends at the backward node, both at their
        # own start time on their own thread.
        at: dict[tuple, int] = {}
        for i in seq_ops:
            e = ops[i]
            at[(str(e.pid), str(e.tid), e.ts)] = i  # later (deeper) ops at the same ts win
        starts: dict = {}
        ends: dict = {}
        for f in flows:
            i = at.get((str(f.pid), str(f.tid), f.ts))
            if i is None:
                continue
            (starts if f.ph == "s" else ends)[f.id] = i
        for fid, node in ends.items():
            src = starts.get(fid)
            if src is not None and is_node[node]:
                fwd_of[node] = src
    if any(is_node[i] and i not in fwd_of for i in seq_ops):
        # No flows (older traces or filtered exports): match by sequence number, deepest op wins.
        by_seq: dict[int, int] = {}
        depth_of: dict[int, int] = {}
        for i in seq_ops:
            if is_node[i] or ops[i].name.startswith(WRAPPER_PREFIX):
                continue
            s = ops[i].args.seq
            d = _depth(parent, i)
            if s not in by_seq or d >= depth_of[s]:
                by_seq[s] = i
                depth_of[s] = d
        for i in seq_ops:
            if is_node[i] and i not in fwd_of:
                f = by_seq.get(ops[i].args.seq)
                if f is not None and ops[f].ts < ops[i].ts:
                    fwd_of[i] = f

    node_of = [-1] * n
    for i in range(n):
        if is_node[i]:
            node_of[i] = i
            p = parent[i]
            if p >= 0 and ops[p].name.startswith(WRAPPER_PREFIX):
                node_of[p] = i
    for i in range(n):
        if node_of[i] < 0:
            p = parent[i]
            if p >= 0:
                node_of[i] = node_of[p]
    return fwd_of, node_of


def _depth(parent: list[int], i: int) -> int:
    d = 0
    while parent[i] >= 0:
        i = parent[i]
        d += 1
    return d


def module_name(e: Event) -> str:
    return e.name[len(MODULE_PREFIX):] if e.name.startswith(MODULE_PREFIX) else e.name
