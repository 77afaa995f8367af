"""The cost on the host, per call: CPU time against GPU time, the launch APIs, and host-bound calls.

The scope of a call is its outermost attention op (aten::scaled_dot_product_attention, a vendor op)
or, without one, the call's own ops; host time is the scope's wall time on its thread (dispatch,
library work and launches, as the post's "CPU avg time" of the *_fwd op), GPU time the summed time
of the kernels launched inside it. Runtime/driver events (launches, occupancy queries, syncs) inside
it on the same thread are named by LAUNCH_APIS. A call whose host time exceeds its GPU time is
host-bound: the GPU waits for the CPU.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np

from ..format.linear_regex import compile_linear
from ..attention import patterns as P
from ..text.units import duration_text
from ..attention.detect import Call
from ..trace.link import Linked
from ..table.arrays import runs_of


class HostApi(msgspec.Struct, frozen=True):
    kind: str  # launch | graph_launch | occupancy_query | sync
    pattern: str
    note: str
    example: str
    source: str


LAUNCH_APIS: tuple[HostApi, ...] = (
    HostApi("graph_launch", r"^(cuda|hip)GraphLaunch", "a CUDA/HIP graph replays many kernels from one launch",
            "hipGraphLaunch", "trace: tl_mi300x_xdit_flux1_aiter_fmha_hipgraph (shared/traces README)"),
    HostApi("launch", r"^cuLaunchKernelEx$", "driver-API extended launch: CUPTI reports 0% achieved occupancy for it "
            "(a measurement gap, not an idle GPU)", "cuLaunchKernelEx", "blog: 'cuDNN backend' (Figure 22, Figure 23)"),
    HostApi("launch", r"^cuLaunchKernel$", "driver-API launch", "cuLaunchKernel", "trace: tl_h100_bert_small_sdpa_flash (22 launches)"),
    HostApi("launch", r"^cudaLaunchKernel(ExC)?$", "runtime-API launch", "cudaLaunchKernelExC",
            "trace: tl_h100_owlv2_eager_bmm_softmax (cudaLaunchKernel 2860, cudaLaunchKernelExC 745)"),
    HostApi("launch", r"^hip(Ext)?(Module)?LaunchKernel$", "HIP launch", "hipExtModuleLaunchKernel",
            "trace: tl_mi300x_bert_small_sdpa_aotriton (hipLaunchKernel 30, hipExtModuleLaunchKernel 26)"),
    HostApi("launch", r"^cudaLaunchCooperativeKernel", "runtime-API cooperative launch", "cudaLaunchCooperativeKernel",
            "source: CUDA runtime API reference (cudaLaunchCooperativeKernel)"),
    HostApi("occupancy_query", r"^(cuda|hip)Occupancy\w+|^cuOccupancy\w+", "an occupancy query before a launch, on the host",
            "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "trace: hta_a100_negative_log_softmax_fwdbwd (237 queries)"),
    HostApi("sync", r"^(cuda|hip)(Stream|Device|Event)Synchronize$", "the host waits for the GPU",
            "cudaStreamSynchronize", "trace: tl_h100_owlv2_eager_bmm_softmax (80)"),
)
_COMPILED = [(compile_linear(a.pattern), a) for a in LAUNCH_APIS]
HOST_BOUND_FIX = ("capture the step in a CUDA graph (torch.compile mode='reduce-overhead' or torch.cuda.graphs), "
                  "give each call more work (a larger batch), or pick a backend with less host work")
HOST_BOUND_SOURCE = "blog: 'The cost moved to the CPU' (cuDNN: 214 µs per forward on the host vs 186.3 µs on the GPU)"


@lru_cache(maxsize=4096)
def api_of(name: str) -> HostApi | None:
    for rx, a in _COMPILED:
        if rx.search(name):
            return a
    return None


class HostCost(msgspec.Struct):
    scope: str  # the op whose wall time is the host time ("" = the call's own ops)
    host_us: float
    gpu_us: float | None  # None: no GPU activity in the trace
    attention_op_self_us: float  # self CPU time of the attention ops in the scope (library work, plan selection)
    dispatch_us: float  # self CPU time of the scope's other ops (ATen dispatch, allocations, views, small kernels' hosts)
    launch_us: float
    launches: Counter  # launch API name -> count
    occupancy_queries: int
    syncs: int
    graph_replay: bool = False  # its kernels replayed from a graph: the host time is the capture's, not the replay's


class _Runtime:
    """The runtime/driver calls (the trace's launches) per thread, sorted by start, as positions into
    columns in that order."""

    def __init__(self, ev):
        lt, names = ev.launch_table, ev.launch_names
        th = runs_of(lt["pid"], lt["tid"])  # keyed as link.py keys threads: (pid, tid) as decoded
        order = np.lexsort((lt["ts"], th.ids))  # by thread, then start, stably
        bounds = np.searchsorted(th.ids[order], np.arange(len(th.values) + 1)).tolist()
        self.span = {k: (bounds[i], bounds[i + 1]) for i, k in enumerate(th.values)}
        self.starts: list[float] = lt["ts"][order].tolist()
        self.durs: list[float] = lt["dur"][order].tolist()
        self.name_ids: list[int] = names.ids[order].tolist()
        self.names: list[str] = names.values
        self.apis: list[HostApi | None] = [api_of(nm) for nm in names.values]  # per distinct name, once

    def within(self, key: tuple, t0: float, t1: float) -> range:
        """The positions of the thread's calls starting in [t0, t1) (times are finite: events.py)."""
        lo, hi = self.span.get(key, (0, 0))
        i = bisect_left(self.starts, t0, lo, hi)
        return range(i, bisect_left(self.starts, t1, i, hi))


def _scope(L: Linked, c: Call, att_ops: list[int], parent: np.ndarray) -> tuple[str, list[int]]:
    """(name, the roots of the scope's op ranges); ``att_ops``: the attention ops' positions, ascending;
    ``parent``: the ops' parents as a column."""
    for k in range(bisect_left(att_ops, c.lo), bisect_left(att_ops, c.hi)):
        i = att_ops[k]
        if L.node_of[i] < 0:
            return L.names[i], [i]
    lo, hi = c.lo, c.hi  # the forward ops whose parent is outside the call
    return "", (lo + np.flatnonzero((parent[lo:hi] < lo) & ~L.bwd_column[lo:hi])).tolist()


def host_costs(L: Linked, calls: list[Call], ev, has_gpu: bool) -> list[HostCost | None]:
    """One HostCost per call with forward ops (None for kernel-only calls: no host side recorded);
    ``ev``: the trace's events (trace/events.py), whose launches' columns hold the runtime calls."""
    rt = _Runtime(ev)
    att_ops = L.where_name(_is_attention_op)
    parent = np.asarray(L.parent, np.int64)
    out: list[HostCost | None] = []
    for c in calls:
        if c.hi <= c.lo:
            out.append(None)
            continue
        name, roots = _scope(L, c, att_ops, parent)
        host = gpu = self_us = launch_us = all_self = 0.0
        launched: Counter = Counter()
        queries = syncs = 0
        for r in roots:
            t0, d = L.ts[r], L.dur[r]
            host += d
            end = L.subtree_end[r]
            gpu += sum(L.gpu_self[r:end])  # the kernels each op launched itself
            all_self += sum(L.self_cpu[r:end])
            self_us += sum(L.self_cpu[att_ops[k]] for k in range(bisect_left(att_ops, r), bisect_left(att_ops, end)))
            for j in rt.within(L.thread_of(r), t0, t0 + d):
                name_id = rt.name_ids[j]
                a = rt.apis[name_id]
                if a is None:
                    continue
                if a.kind in ("launch", "graph_launch"):
                    launched[rt.names[name_id]] += 1
                    launch_us += rt.durs[j]
                elif a.kind == "occupancy_query":
                    queries += 1
                elif a.kind == "sync":
                    syncs += 1
        replay = bool(c.info.get("graph_replay"))
        if replay:
            gpu += sum(k.dur for k in c.kernels if k.op < 0)
        out.append(HostCost(name, host, gpu if has_gpu else None, self_us, max(0.0, all_self - self_us), launch_us,
                            launched, queries, syncs, replay))
    return out


def _is_attention_op(name: str) -> bool:
    return P.attention_op(name) is not None


def group(calls: list[Call], costs: list[HostCost | None],
          no_forward: set[int] | frozenset[int] = frozenset(), cpu_only: bool = False) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (layer type, implementation): means per call, the launch APIs and whether it is host-bound.
    ``no_forward``: the calls whose GPU forward the trace lacks, left out of the means (expected.no_forward)
    where the group has calls with one; a group of such calls only has no GPU figure (unknown, not 0).
    ``cpu_only``: the trace has no GPU at all, so the ops' self time is the computation itself (said so)."""
    by: dict[tuple[str, str], list[HostCost]] = {}
    lacking: dict[tuple[str, str], list[HostCost]] = {}
    for c in calls:
        h = costs[c.id]
        if h is not None:
            (lacking if c.id in no_forward else by).setdefault((c.layer_type, c.implementation), []).append(h)
    for key, hs in lacking.items():
        if key not in by:  # every call of the group lacks its forward: the host side stays, the GPU is unknown
            by[key] = [msgspec.structs.replace(h, gpu_us=None) for h in hs]
    out = {}
    for key, hs in by.items():
        n = len(hs)
        host = sum(h.host_us for h in hs) / n
        gpu = sum(h.gpu_us for h in hs) / n if all(h.gpu_us is not None for h in hs) else None
        launched: Counter = Counter()
        for h in hs:
            launched.update(h.launches)
        scopes = Counter(h.scope for h in hs)
        replay = any(h.graph_replay for h in hs)
        bound = None if gpu is None or replay else host > gpu
        apis = []
        for nm, cnt in launched.most_common():
            a = api_of(nm)
            apis.append({"name": nm, "per_call": round(cnt / n, 3), "note": a.note if a else "", "source": a.source if a else ""})
        out[key] = {
            "scope": scopes.most_common(1)[0][0] or None,
            "host_us_per_call": round(host, 3),
            "gpu_us_per_call": round(gpu, 3) if gpu is not None else None,
            "attention_op_self_us_per_call": round(sum(h.attention_op_self_us for h in hs) / n, 3),
            "dispatch_us_per_call": round(sum(h.dispatch_us for h in hs) / n, 3),
            "launch_us_per_call": round(sum(h.launch_us for h in hs) / n, 3),
            "launch_apis": apis,
            "occupancy_queries_per_call": round(sum(h.occupancy_queries for h in hs) / n, 3),
            "syncs_per_call": round(sum(h.syncs for h in hs) / n, 3),
            "host_bound": bound,
            "fix": HOST_BOUND_FIX if bound else None,
            "source": HOST_BOUND_SOURCE,
            "graph_replay": replay,
            **({"cpu_only": True} if cpu_only else {}),  # written only when true (the Struct omits its default)
            "summary": (_cpu_summary(host) if cpu_only
                        else _summary(host, gpu, bound, apis, replay, len(lacking.get(key, ())))),
        }
    return out


def _cpu_summary(host: float) -> str:
    return (f"{duration_text(host)} per call on the CPU; this trace recorded no GPU, so the ops compute on the host: "
            "their own time is the work itself, not dispatch, and there is no GPU to be bound by")


def _summary(host: float, gpu: float | None, bound: bool | None, apis: list[dict], replay: bool = False,
             apart: int = 0) -> str:
    text = _summary_of(host, gpu, bound, apis, replay)
    if apart:
        text += (f"; {apart} call(s) with no GPU forward in the trace (cut window or backward only) "
                 + ("left out of these means" if gpu is not None else "only: no GPU time to compare"))
    return text


def _summary_of(host: float, gpu: float | None, bound: bool | None, apis: list[dict], replay: bool) -> str:
    if replay:
        return (f"{duration_text(gpu or 0)} per call on the GPU, replayed from a graph: the host launched it once at capture "
                f"({duration_text(host)} then), so no host cost per call")
    if gpu is None:
        return f"{duration_text(host)} per call on the host; no GPU activity in this trace, so whether it is host-bound is unknown"
    via = ", ".join(f"{a['name']} ×{a['per_call']:g}" for a in apis[:3]) or "no launch recorded"
    verdict = "host-bound: the GPU waits for the CPU" if bound else "GPU-bound"
    return f"{duration_text(host)} per call on the host vs {duration_text(gpu)} on the GPU ({verdict}); launches: {via}"
