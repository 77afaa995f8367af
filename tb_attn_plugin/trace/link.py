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
from array import array
from itertools import repeat
from operator import attrgetter
from typing import Any, Callable, NamedTuple, Sequence

import msgspec
import numpy as np
from msgspec import Raw

from ..table import columns
from . import window
from . import native
from ..table.arrays import Interned, Names, as_array, intern, new_array, runs_of, values_at
from .records import NO_ARGS, Table
from .events import CATS, MODULE_PREFIX, PYTHON_CAT, Event, Events, Shapes, op_args
from .launch_config import LaunchColumns

GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.I)
BWD_NODE = re.compile(r"Backward\d*$")
WRAPPER_PREFIX = "autograd::engine::evaluate_function: "
STEP_PREFIX = "ProfilerStep#"


class Kernel(msgspec.Struct):  # one per kernel, made from the GPU activities' columns: no per-instance dict
    """A kernel (or memcpy, memset) as the analysis reads it: its event's fields and its links."""

    op: int  # the op's position in Linked's columns, -1 when no op is known
    graph: bool  # replayed from a CUDA/HIP graph
    i: int  # its position in Linked.kernels (and in the kernel_* columns)
    name: str
    cat: str
    pid: Any
    tid: Any
    ts: float
    dur: float


class Linked(msgspec.Struct):
    """The linked trace. Ops are columns in tree order (an op is its position), with no object per op:
    their names, categories (ids into events.CATS), times, threads, and the shapes of the few that
    keep them."""

    names: list[str]  # each op's name
    cats: Sequence[int]  # each op's category, an index into events.CATS
    shapes: dict[int, Shapes | Raw]  # op -> its shapes (Input Dims, types, ...) for the ops keep_shapes wanted (args())
    has_args: bytes  # 1 for each op whose event holds an args object (then args() is never None)
    # Each op's start, duration and thread as columns (array("d"/"q"), read as Python floats and ints)
    ts: Sequence[float]
    dur: Sequence[float]
    thread: Sequence[int]  # index into threads
    threads: list[tuple]  # (pid, tid) as decoded, one per thread; a thread's ops are contiguous
    # Per op: arrays, or lists where a pass in Python builds them (both index the same way).
    parent: Sequence[int]
    depth: Sequence[int]
    subtree_end: Sequence[int]
    self_cpu: Sequence[float]
    gpu_self: Sequence[float]  # GPU time of kernels launched directly by the op
    launches_self: Sequence[int]
    step: Sequence[int]  # ProfilerStep number of each op, -1 outside steps
    node_of: list[int]  # backward node enclosing the op (or the wrapper's node), -1 in forward
    fwd_of: dict[int, int]  # backward node index -> forward op index
    kernels: list[Kernel]
    steps: dict[int, tuple[float, float]]  # step -> (start, end) on the host
    unlinked_kernels: int = 0
    graph_kernels: int = 0
    unrecorded: window.Unrecorded | None = None  # kernel launches whose kernel the trace lacks (window.py)
    before_window: window.BeforeWindow | None = None  # GPU activities from before the window (window.py)
    # the kernels' record columns (events.GPU_FIELDS: their args' ints, stream and tid), in kernel order
    kernel_table: Table | None = None
    kernel_config: LaunchColumns | None = None  # each kernel's launch configuration, as columns
    warnings: list[str] = msgspec.field(default_factory=list)
    _bwd: list[bool] | None = None
    _bwd_column: np.ndarray | None = None
    _cpu: bytes | None = None
    # The op names' distinct values (each op's name as an id into these) and each one's ops (where_name)
    _name_values: list[str] | None = None
    _name_ids: Sequence[int] | None = None
    _positions: list | None = None
    # Each kernel's op, duration and name (as an id into the distinct names) as columns (kernel_*)
    _kernel_op: Sequence[int] | None = None
    _kernel_dur: Sequence[float] | None = None
    _kernel_ts: np.ndarray | None = None
    _kernel_names: Interned | None = None

    @property
    def kernel_op(self) -> Sequence[int]:
        """Each kernel's op (-1: none), as a column."""
        if self._kernel_op is None:
            self._kernel_op = array("q", map(_OP, self.kernels))
        return self._kernel_op

    @property
    def kernel_dur(self) -> Sequence[float]:
        """Each kernel's duration, as a column."""
        if self._kernel_dur is None:
            self._kernel_dur = array("d", map(float, map(_KERNEL_DUR, self.kernels)))
        return self._kernel_dur

    @property
    def kernel_ts(self) -> np.ndarray:
        """Each kernel's start (float64), as a column."""
        if self._kernel_ts is None:
            self._kernel_ts = np.fromiter((k.ts for k in self.kernels), np.float64, len(self.kernels))
        return self._kernel_ts

    @property
    def kernel_names(self) -> Interned:
        """Each kernel's name as an id (ids: int64) into the distinct names (values), found once."""
        if self._kernel_names is None:
            self._kernel_names = intern(list(map(_KERNEL_NAME, self.kernels)))
        return self._kernel_names

    @property
    def bwd(self) -> list[bool]:
        """Whether each op runs in backward (has a backward node), as a column."""
        if self._bwd is None:
            self._bwd = list(map((-1).__lt__, self.node_of))
        return self._bwd

    @property
    def bwd_column(self) -> np.ndarray:
        """Whether each op runs in backward, as a numpy bool column (groupings read it at C speed)."""
        if self._bwd_column is None:
            self._bwd_column = np.fromiter(self.node_of, np.int64, len(self.node_of)) >= 0
        return self._bwd_column

    def cat(self, i: int) -> str:
        return CATS[self.cats[i]]

    def thread_of(self, i: int) -> tuple:
        """Op i's (pid, tid), as decoded."""
        return self.threads[self.thread[i]]

    def is_module(self, i: int) -> bool:
        return self.cats[i] == _PYTHON_CAT_ID

    def args(self, i: int) -> Shapes | None:
        """Op i's args as the analysis reads them (its shapes; each one None where not kept), None
        where its event has no args object."""
        got = self.shapes.get(i)
        if got is None:
            return _NO_SHAPES if self.has_args[i] else None
        if type(got) is not Shapes:
            got = self.shapes[i] = op_args(got)  # decoded on first read
        return got

    @property
    def cpu(self) -> bytes:
        """1 for each cpu op (cat "cpu_op"; not annotations or module scopes), else 0, as a column."""
        if self._cpu is None:
            self._cpu = bytes(map(_CPU_OP_ID.__eq__, self.cats))
        return self._cpu

    def _interned(self) -> None:
        if self._positions is None:
            got = intern(self.names)
            self._name_values, self._name_ids = got.values, got.ids
            self._positions = columns.positions(got.ids, len(got.values))

    def where_name(self, test: Callable[[str], object]) -> list[int]:
        """The ops (ascending) whose name passes ``test``, asked once per distinct name: a trace
        repeats a few thousand names over millions of ops, so where each name occurs is found once
        and each question only joins the positions of the names that pass."""
        self._interned()
        return columns.where(self._name_values, self._positions, test)

    def name_codes(self) -> tuple[np.ndarray, list[str]]:
        """(each op's name as an id (int64), the distinct names by id)."""
        self._interned()
        return np.asarray(self._name_ids, np.int64), self._name_values

    def name_ids(self, wanted: set | frozenset):
        """(each op's name as an id, for each id whether its name is in ``wanted``): for columns.picked."""
        self._interned()
        return self._name_ids, np.fromiter(map(wanted.__contains__, self._name_values), bool,
                                           len(self._name_values))


def _sortable(key: tuple):
    # pids/tids are ints in kineto but strings in some writers; never compare the two kinds
    return (str(key[0]), str(key[1]))


_OP, _KERNEL_DUR, _KERNEL_NAME = attrgetter("op"), attrgetter("dur"), attrgetter("name")
CPU_OP = "cpu_op"  # Linked.cpu's category
_CPU_OP_ID, _PYTHON_CAT_ID = CATS.index(CPU_OP), CATS.index(PYTHON_CAT)
_NO_SHAPES = Shapes()  # the args of an op that kept no shapes


class OpTree(NamedTuple):
    """The op tree (op_tree): in tree order, each op's name (an id into the distinct names, numbered
    in tree order), category (an index into events.CATS), shapes (the few kept), parent, subtree end,
    depth, self time, start, duration and thread; the threads; each launch's op (by its position in
    file order); each position's op (order: its index in file order); the cpu-op flags (Linked.cpu);
    and each op's sequence number and External id (args' ints, kept in the record) with whether it
    holds one."""

    names: Interned
    cats: np.ndarray
    shapes: dict[int, Shapes | Raw]
    has_args: bytes
    parent: Sequence[int]
    subtree_end: Sequence[int]
    depth: Sequence[int]
    self_cpu: Sequence[float]
    ts: Sequence[float]
    dur: Sequence[float]
    thread: Sequence[int]
    threads: list[tuple]
    launch_op: Sequence[int]
    order: np.ndarray | None = None
    cpu: bytes | None = None
    has_seq: np.ndarray | None = None  # bool per op in tree order: its args hold a Sequence number
    seq: np.ndarray | None = None  # int64 per op in tree order (0 where it holds none)
    has_external: np.ndarray | None = None
    external: np.ndarray | None = None


def op_tree(ev: Events) -> OpTree:
    """The op tree, what link starts from: per thread, ops sorted by (start, -duration), stably
    (numpy), then nested by time in one pass (native.nest_sorted: the ops a stack holds are
    inherently sequential, and exact on ops that overlap without nesting)."""
    ot, lt = ev.op_table, ev.launch_table
    (oth, okeys), (lth, lkeys) = runs_of(ot["pid"], ot["tid"]), runs_of(lt["pid"], lt["tid"])
    ots, odur, lts = ot["ts"], ot["dur"], lt["ts"]
    threads = sorted(set(okeys) | set(lkeys), key=_sortable)
    rank = {k: r for r, k in enumerate(threads)}
    orank = np.array([rank[k] for k in okeys], np.int64)[oth]
    lrank = np.array([rank[k] for k in lkeys], np.int64)[lth]
    order = _tree_order(orank, ots, odur)
    lorder = _tree_order(lrank, lts, None)
    n, m = len(order), len(lorder)
    # The columns Linked hands to passes in Python are array.arrays, numpy writing into them (new_array).
    (ts_col, ts), (dur_col, dur), (thread_col, thread) = new_array("d", n), new_array("d", n), new_array("q", n)
    for col, out in ((ots, ts), (odur, dur), (orank, thread)):
        np.take(col, order, out=out, mode="clip")  # clip: indices are in range; "raise" would buffer the out
    bounds = np.arange(len(threads) + 1)
    (parent_col, parent), (subtree_col, subtree_end), (depth_col, depth) = (new_array("q", n) for _ in range(3))
    lop = np.empty(m, np.int64)
    native.nest_sorted(ts, dur, np.searchsorted(thread, bounds), lts[lorder], np.searchsorted(lrank[lorder], bounds),
                       parent, subtree_end, depth, lop)
    launch_col, launch_op = new_array("q", m)
    launch_op[lorder] = lop
    # Self time: each op's duration less its children's, subtracted one by one in tree order
    # (ufunc.at applies them in index order), what a loop over the children would give.
    self_col, self_cpu = new_array("d", n)
    self_cpu[:] = dur
    child = np.flatnonzero(parent >= 0)
    np.subtract.at(self_cpu, parent[child], dur[child])
    self_cpu[~(self_cpu > 0)] = 0.0
    cats = ot["cat"][order]
    cpu = (cats == _CPU_OP_ID).astype(np.uint8).tobytes()
    at = np.empty(n, np.int64)  # each op's position in the tree order
    at[order] = np.arange(n)
    shaped = list(ev.op_shapes)
    shapes = dict(zip(at[shaped].tolist(), ev.op_shapes.values())) if shaped else {}
    has_args = ((ot["nulls"][order] & NO_ARGS) == 0).astype(np.uint8).tobytes()
    # the names numbered again in tree order, as interning them in that order would
    name_ids, first_ids = columns.factorize(range(n), (ev.op_names.ids[order],))
    names = Interned(name_ids, list(map(ev.op_names.values.__getitem__, first_ids)))
    return OpTree(names, cats, shapes, has_args, parent_col, subtree_col, depth_col, self_col, ts_col, dur_col,
                  thread_col, threads, launch_col, order, cpu, ot.has("seq")[order], ot["seq"][order],
                  ot.has("external_id")[order], ot["external_id"][order])


def _tree_order(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray | None) -> np.ndarray:
    """The positions sorted by (thread, start, -duration), stably (what np.lexsort gives, about
    20x faster on a trace: its starts come nearly sorted, and few ops start at the same time)."""
    p = np.argsort(ts, kind="stable")
    if dur is not None and len(p) > 1:
        t = ts[p]
        same = t[1:] == t[:-1]
        tied = np.flatnonzero(np.concatenate(([False], same)) | np.concatenate((same, [False])))
        if len(tied):  # ops that start together: the longest first (the outer one)
            run = np.cumsum(np.concatenate(([True], ~same)))[tied]
            p[tied] = p[tied][np.lexsort((-dur[p[tied]], run))]
    key = thread[p]
    return p[np.argsort(key.astype(np.uint16) if len(key) and key.max() < 65536 else key, kind="stable")]


def launches_by_correlation(ev: Events) -> dict[int, int]:
    """Correlation id -> the position of its launch in file order (a later launch wins)."""
    lt = ev.launch_table
    idx = np.flatnonzero(lt.has("correlation"))
    return dict(zip(lt["correlation"][idx].tolist(), idx.tolist()))


def link(ev: Events) -> Linked:
    """The linked trace."""
    interned, cats, shapes, has_args, parent, subtree_end, depth, self_cpu, ts, dur, thread, threads, launch_op, \
        order, cpu, has_seq, seq, has_external, external = op_tree(ev)
    n = len(ts)

    # Kernels -> launch -> op.
    by_corr = launches_by_correlation(ev)
    gt = ev.gpu_table
    correlated = gt.has("correlation")
    # the correlation ids of the GPU activities recorded (window.unrecorded); with any activity
    # lacking one, no launch can be said to lack its kernel
    uncorrelated = len(gt) - int(correlated.sum())
    recorded = set(gt["correlation"][correlated].tolist())
    # the cpu ops by External id (a kernel with no launch in the trace names its op by it); the first wins
    with_external = np.flatnonzero(has_external & (np.frombuffer(cpu, np.uint8) != 0))
    external_op = lambda: dict(zip(external[with_external].tolist()[::-1], with_external.tolist()[::-1]))
    kernels, gpu_self, launches_self, unlinked, graph_kernels, kernel_op = _kernels(
        ev.gpu_names, gt, n, ev.launch_names, by_corr, launch_op, external_op)

    lost = window.unrecorded(ev, by_corr, recorded, launch_op, None) if not uncorrelated else None
    if lost is not None:
        lost.gpu_end = float((gt["ts"] + gt["dur"]).max()) if len(gt) else None
    del recorded

    # Steps: the nearest enclosing ProfilerStep annotation, filled over each one's subtree (an inner
    # one, later in the order, overwrites its own range).
    step_col, step = new_array("q", n)
    step[:] = -1
    steps: dict[int, tuple[float, float]] = {}
    names = values_at(interned.values, interned.ids)
    positions = columns.positions(interned.ids, len(interned.values))  # kept in Linked for where_name
    for i in columns.where(interned.values, positions, lambda nm: nm.startswith(STEP_PREFIX)):
        digits = names[i][len(STEP_PREFIX):]
        # ASCII digits, at most 12: a step number a JSON client can read back exactly (and never
        # int() of a 5,000-digit string, which Python refuses); anything else is no step.
        s = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 12 else -1
        step[i:subtree_end[i]] = s
        if s >= 0:
            steps[s] = (ts[i], ts[i] + dur[i])

    with_seq = np.flatnonzero(has_seq)
    fwd_of, node_of, any_backward = _link_backward(names, ts, thread, threads, parent, subtree_end, ev.flows,
                                                   with_seq.tolist(),
                                                   dict(zip(with_seq.tolist(), seq[with_seq].tolist())))
    for node, f in fwd_of.items():
        # The autograd thread has no ProfilerStep: a backward node runs in its forward op's step.
        if step[node] < 0:
            mine = step[node:subtree_end[node]]  # a view: filled in place
            mine[mine < 0] = step[f]

    return Linked(
        names=names,
        cats=as_array("q", cats),
        shapes=shapes,
        has_args=has_args,
        ts=ts,
        dur=dur,
        thread=thread,
        threads=threads,
        parent=parent,
        depth=depth,
        subtree_end=subtree_end,
        self_cpu=self_cpu,
        gpu_self=gpu_self,
        launches_self=launches_self,
        step=step_col,
        node_of=node_of,
        fwd_of=fwd_of,
        kernels=kernels,
        steps=steps,
        unlinked_kernels=unlinked,
        graph_kernels=graph_kernels,
        _name_values=interned.values,
        _name_ids=interned.ids,
        _positions=positions,
        _bwd=None if any_backward else [False] * n,  # inference: no op runs in backward
        _bwd_column=None if any_backward else np.zeros(n, bool),
        _cpu=cpu,
        _kernel_op=kernel_op,
        _kernel_dur=as_array("d", gt["dur"].astype(np.float64, copy=False)),
        _kernel_ts=gt["ts"].astype(np.float64, copy=False),
        _kernel_names=Interned(ev.gpu_names.ids, ev.gpu_names.values),
        kernel_config=ev.gpu_config,
        unrecorded=lost,
        before_window=window.before_window(ev, gt, by_corr),
        kernel_table=gt,
    )


def _kernels(gpu_names: Names, gt: Table, n: int, launch_names: Names, by_corr: dict[int, int],
             launch_op: Sequence[int], external_op: Callable[[], dict[int, int]]
             ) -> tuple[list[Kernel], array, array, int, int, array]:
    """(the kernels, each op's GPU self time and launch count, kernels linked to no op, kernels
    replayed from a graph, each kernel's op): each kernel's launch by correlation id, its op the launch's (none under a
    graph launch), else the cpu op of its External id (``external_op()``: External id -> op). ``gt``: the kernels' columns (correlation ids
    and durations read there, not from each event). The sums per op run at C speed, each op's in
    kernel order from 0.0, as a loop over the kernels adds them."""
    m = len(gt)
    pos = np.full(m, -1, np.int64)  # each kernel's launch; -1: no correlation id, or no launch of it
    has = np.flatnonzero(gt.has("correlation"))
    pos[has] = np.fromiter([by_corr.get(c, -1) for c in gt["correlation"][has].tolist()], np.int64, len(has))
    linked = np.flatnonzero(pos >= 0)
    graph = np.zeros(m, bool)
    if len(linked):  # few names, many launches: each name searched once
        graph_name = np.array([GRAPH_LAUNCH.search(nm) is not None for nm in launch_names.values], bool)
        graph[linked] = graph_name[launch_names.ids[pos[linked]]]
    op = np.full(m, -1, np.int64)
    direct = linked[~graph[linked]]
    if len(direct):
        op[direct] = np.asarray(launch_op, np.int64)[pos[direct]]
    unlinked = 0
    alone = np.flatnonzero(pos < 0)  # no launch in the window: the External id
    if len(alone):
        ext = alone[gt.has("external_id")[alone]]
        if len(ext):
            by_ext = external_op()
            op[ext] = np.fromiter(map(by_ext.get, gt["external_id"][ext].tolist(), repeat(-1)), np.int64, len(ext))
        unlinked = int((op[alone] < 0).sum())
    owned = np.flatnonzero(op >= 0)
    dur = gt["dur"][owned].astype(np.float64, copy=False)
    gpu_self = as_array("d", np.bincount(op[owned], weights=dur, minlength=n).astype(np.float64, copy=False))
    launches_self = as_array("q", np.bincount(op[owned], minlength=n).astype(np.int64, copy=False))
    values = gpu_names.values
    kernels = list(map(Kernel, op.tolist(), graph.tolist(), range(m), values_at(values, gpu_names.ids),
                       values_at(list(CATS), gt["cat"]), gt["pid"].tolist(), gt["tid"].tolist(),
                       gt["ts"].tolist(), gt["dur"].tolist()))
    return kernels, gpu_self, launches_self, unlinked, int(graph.sum()), as_array("q", op)


def _link_backward(names: list[str], ts: Sequence[float], thread: Sequence[int], threads: list[tuple],
                   parent: Sequence[int], subtree_end: Sequence[int], flows: list[Event], seq_ops: list[int],
                   seq_of: dict[int, int]):
    """(backward node -> forward op, each op's backward node); the ops' names, starts and threads as
    columns; ``seq_ops``: the ops with a sequence number, ``seq_of``: op -> its sequence number."""
    n = len(names)
    is_node = [False] * n
    node_name: dict[str, bool] = {}  # few distinct names
    for i in seq_ops:
        nm = names[i]
        yes = node_name.get(nm)
        if yes is None:
            yes = node_name[nm] = BWD_NODE.search(nm) is not None and not nm.startswith(WRAPPER_PREFIX)
        if yes:
            is_node[i] = True

    fwd_of: dict[int, int] = {}
    if flows and seq_ops:
        # A flow starts at the innermost forward op and ends at the backward node, both at their
        # own start time on their own thread.
        at: dict[tuple, int] = {}
        keys = [(str(pid), str(tid)) for pid, tid in threads]
        for i in seq_ops:
            at[(*keys[thread[i]], ts[i])] = i  # later (deeper) ops at the same ts win
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
            if is_node[i] or names[i].startswith(WRAPPER_PREFIX):
                continue
            s = seq_of[i]
            d = _depth(parent, i)
            if s not in by_seq or d >= depth_of[s]:
                by_seq[s] = i
                depth_of[s] = d
        for i in seq_ops:
            if is_node[i] and i not in fwd_of:
                f = by_seq.get(seq_of[i])
                if f is not None and ts[f] < ts[i]:
                    fwd_of[i] = f

    # Each node, and the wrapper op around it, marks itself; every other op takes the mark of its
    # nearest marked ancestor: each mark filled over its subtree, inner ones (later) last.
    marks: dict[int, int] = {}
    for i in seq_ops:
        if is_node[i]:
            marks[i] = i
            p = parent[i]
            if p >= 0 and names[p].startswith(WRAPPER_PREFIX):
                marks[p] = i
    node_of = [-1] * n
    for i in sorted(marks):
        node_of[i:subtree_end[i]] = [marks[i]] * (subtree_end[i] - i)
    return fwd_of, node_of, bool(marks)


def _depth(parent: list[int], i: int) -> int:
    d = 0
    while parent[i] >= 0:
        i = parent[i]
        d += 1
    return d


def module_name(name: str) -> str:
    """An nn.Module scope's module, as its op's name gives it."""
    return name[len(MODULE_PREFIX):] if name.startswith(MODULE_PREFIX) else name
