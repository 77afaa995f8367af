"""``tb-attn annotate``: the trace, copied, with the analysis on a process track of its own (for Perfetto).

The added events (Chrome trace format, as kineto writes them) live on one new pid, named by ``M``
events, with one thread per host thread or GPU stream that ran attention (and more lanes when
calls overlap, because slices on one track must nest strictly):

* one slice per attention call and pass, named with its layer, on the host thread of its ops and
  on each GPU stream of its kernels; args: implementation, SDPA backend, shape, dtype, causal,
  FLOPs (convention in ``flops_convention``), achieved TFLOP/s and the score-matrix bytes;
* inside it, one slice per run of a stage (``qk_matmul``, ``softmax``, ``fused``, ``split_kv_reduce``, ...);
* flow arrows from each GPU stage slice to its kernels (to its ops in a trace without kernels);
* when the trace has memory events, a counter of the score-matrix memory live at each moment: the
  score-matrix blocks those events show (allocated in a call, B·H·Lq·Lk·itemsize, until freed, which
  in training is in the backward), or, where they show none, an estimate from the unfused calls' shapes.

All times are whole nanoseconds before they are written, so a stage ends inside its call exactly.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from ..attention import patterns as P
from ..attention import shapes
from ..format import tags
from ..text import units
from ..attention.stages import kernel_stage
from ..memory.engine import score_blocks
from ..trace.link import Kernel, Linked
from ..trace.splice import write_spliced
from ..format.version import ENGINE_VERSION
from .build import analyze_file
from .layers import UNFUSED

TRACK_NAME = "tb-attn: attention calls"
CAT_CALL = "tb_attn.call"
CAT_STAGE = "tb_attn.stage"
CAT_FLOW = "tb_attn.flow"
FLOW_BASE = 1 << 40  # flow ids far above kineto's correlation and sequence numbers
CORE = frozenset(tags.CORE_STAGES)
SCORE_MEASURED = "score matrix bytes (memory events)"
SCORE_ESTIMATED = "score matrix bytes (estimated from shapes)"
FLOPS_CONVENTION = "4*B*H*Lq*Lk*D forward, halved when causal; backward 2.5x (FlashAttention benchmarks)"


def _ns(us: float) -> int:
    return int(round(us * 1000.0))


def _us(ns: int) -> float:
    return ns / 1000.0


def kernel_place(L: Linked, k: Kernel, call_of: list[int], stage_of: list, kernel_call: list[int]):
    """(call, stage, pass) of a kernel, or None; the same rule as metrics.measure()."""
    op = k.op
    if op >= 0 and call_of[op] >= 0:
        return call_of[op], kernel_stage(stage_of[op] or "other", k.name), "bwd" if L.node_of[op] >= 0 else "fwd"
    c = kernel_call[k.i]
    if c < 0:
        return None
    fam = P.kernel_family(k.name)
    stage = fam.stage if fam is not None and fam.stage in P.HELPER_STAGES else "fused"
    ps = fam.pass_ if fam is not None and fam.pass_ else ("bwd" if op >= 0 and L.node_of[op] >= 0 else "fwd")
    return c, stage, ps


class _Tracks:
    """Thread ids on the new pid: one per (source track, lane); a lane holds calls that do not overlap."""

    def __init__(self):
        self.lanes: dict[tuple, list[int]] = {}  # source key -> [end ns of each lane]
        self.tids: dict[tuple, int] = {}
        self.names: dict[int, str] = {}

    def place(self, key: tuple, label: str, start: int, end: int) -> int:
        ends = self.lanes.setdefault(key, [])
        for lane, e in enumerate(ends):
            if e <= start:
                ends[lane] = end
                break
        else:
            ends.append(end)
            lane = len(ends) - 1
        tk = key + (lane,)
        tid = self.tids.get(tk)
        if tid is None:
            tid = self.tids[tk] = len(self.tids) + 1
            self.names[tid] = label + (f" ({lane + 1})" if lane else "")
        return tid


def _call_args(c, ps: str, core_gpu_us: float, has_gpu: bool) -> dict[str, Any]:
    info = c.info
    shape = info.get("shape")
    f = shapes.flops(shape, info.get("causal"))
    flops = f * (2.5 if ps == "bwd" else 1.0) if f else None
    args: dict[str, Any] = {"call": c.id, "layer": c.layer, "layer_type": c.layer_type, "pass": ps,
                            "implementation": c.implementation, "sdpa_backend": c.backend or None,
                            "source": c.source, "step": c.step, "shape": shape, "dtype": info.get("dtype"),
                            "causal": info.get("causal"), "flops": flops, "flops_convention": FLOPS_CONVENTION}
    if flops and has_gpu:
        args["tflops"] = units.sig(units.per_second(flops, core_gpu_us, 1e12))
    if c.implementation in UNFUSED:
        args["score_matrix_bytes"] = shapes.score_bytes(shape, info.get("dtype"))
    args["tb_attn_engine"] = ENGINE_VERSION
    return {k: v for k, v in args.items() if v is not None}


def events(L: Linked, calls, call_of: list[int], m, pid: int, trace_events) -> Iterator[dict[str, Any]]:
    """The added events, one dict at a time (metadata last, once every track is known);
    ``trace_events``: the decoded trace (its [memory] events make the score-matrix counter)."""
    tracks = _Tracks()
    flow_id = FLOW_BASE
    has_gpu = bool(L.kernels)
    stage_of = m.stage_of
    by_call: dict[int, list[tuple[Kernel, str, str]]] = {}
    for k in L.kernels:
        got = kernel_place(L, k, call_of, stage_of, m.kernel_call)
        if got is not None:
            by_call.setdefault(got[0], []).append((k, got[1], got[2]))
    score_spans: list[tuple[int, int, int]] = []

    for c in calls:
        kernels = by_call.get(c.id, [])
        core = {"fwd": 0.0, "bwd": 0.0}
        for k, st, ps in kernels:
            if st in CORE:
                core[ps] += k.dur
        label = c.layer or f"call {c.id}"
        # Host side: the forward ops of the call, and each backward node's ops.
        ranges = [(c.lo, c.hi, "fwd")] if c.hi > c.lo else []
        ranges += [(nd, L.subtree_end[nd], "bwd") for nd in c.bwd_nodes]
        for lo, hi, ps in ranges:
            yield from _host_slices(L, c, lo, hi, ps, label, tracks, pid, stage_of,
                                    _call_args(c, ps, core[ps], has_gpu), flows=not has_gpu, flow_base=flow_id)
            flow_id += hi - lo
            if ps == "fwd" and c.implementation in UNFUSED:
                sb = shapes.score_bytes(c.info.get("shape"), c.info.get("dtype"))
                if sb:
                    a, b = _span(L, lo, hi)
                    score_spans.append((a, b, int(sb)))
        # Device side: per stream and pass, the call's kernels in time order.
        groups: dict[tuple, list[tuple[Kernel, str]]] = {}
        for k, st, ps in kernels:
            groups.setdefault((str(k.pid), str(k.tid), ps), []).append((k, st))
        for (kpid, ktid, ps), ks in sorted(groups.items()):
            ks.sort(key=lambda x: x[0].ts)
            runs: list[list] = []  # [stage, start ns, end ns, [kernels]]
            for k, st in ks:
                a, b = _ns(k.ts), _ns(k.ts + k.dur)
                if runs and runs[-1][0] == st:
                    runs[-1][2] = max(runs[-1][2], b)
                    runs[-1][3].append(k)
                else:
                    if runs:
                        a = max(a, runs[-1][2])  # overlapping kernels: keep the stages disjoint
                        b = max(a, b)
                    runs.append([st, a, b, [k]])
            start, end = runs[0][1], max(r[2] for r in runs)
            tid = tracks.place(("gpu", kpid, ktid), f"attention calls · GPU {kpid} stream {ktid}", start, end)
            name = label if ps == "fwd" else f"{label} (bwd)"
            yield _slice(pid, tid, name, CAT_CALL, start, end, _call_args(c, ps, core[ps], has_gpu))
            for st, a, b, kk in runs:
                yield _slice(pid, tid, st, CAT_STAGE, a, b, {"stage": st, "pass": ps, "kernels": len(kk), "call": c.id})
                for k in kk:
                    flow_id += 1
                    t = _ns(k.ts)
                    t_in = min(max(t, a), b)
                    yield {"ph": "s", "id": flow_id, "pid": pid, "tid": tid, "ts": _us(t_in), "name": "tb-attn stage",
                           "cat": CAT_FLOW}
                    yield {"ph": "f", "bp": "e", "id": flow_id, "pid": k.pid, "tid": k.tid, "ts": _us(t),
                           "name": "tb-attn stage", "cat": CAT_FLOW}

    if trace_events.memory:
        blocks = score_blocks(trace_events, L, calls, call_of, stage_of, m.members)
        measured = [(_ns(a), _ns(b), n) for a, b, n in blocks]
        if measured:
            yield from _score_counter(pid, measured, SCORE_MEASURED)
        elif score_spans:
            yield from _score_counter(pid, score_spans, SCORE_ESTIMATED)
    yield {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": TRACK_NAME}}
    yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}}
    for tid, name in sorted(tracks.names.items()):
        yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}


def _span(L: Linked, lo: int, hi: int) -> tuple[int, int]:
    ts, dur = L.ts, L.dur
    return (min(_ns(ts[j]) for j in range(lo, hi)), max(_ns(ts[j] + dur[j]) for j in range(lo, hi)))


def _host_slices(L: Linked, c, lo: int, hi: int, ps: str, label: str, tracks: _Tracks, pid: int, stage_of,
                 args: dict, flows: bool, flow_base: int):
    ts, dur, parent, end = L.ts, L.dur, L.parent, L.subtree_end
    start, stop = _span(L, lo, hi)
    root_pid, root_tid = L.thread_of(lo)
    tid = tracks.place(("host", str(root_pid), str(root_tid)), f"attention calls · host thread {root_tid}", start, stop)
    yield _slice(pid, tid, label if ps == "fwd" else f"{label} (bwd)", CAT_CALL, start, stop, args)
    # A stage slice is the largest subtree whose ops all have one stage.
    uniform = [True] * (hi - lo)
    for j in range(hi - 1, lo - 1, -1):
        p = parent[j]
        if p >= lo and (not uniform[j - lo] or stage_of[j] != stage_of[p]):
            uniform[p - lo] = False
    # Consecutive subtrees of one stage (a view, a copy, a view: "other") make one slice.
    runs: list[list] = []  # [stage, start ns, end ns, [op indices]]
    i, last = lo, start
    while i < hi:
        st = stage_of[i]
        if not uniform[i - lo] or st is None:
            i += 1
            continue
        a = max(_ns(ts[i]), last)
        b = min(max(_ns(ts[i] + dur[i]), a), stop)
        a = min(a, b)
        last = b
        if runs and runs[-1][0] == st:
            runs[-1][2] = b
            runs[-1][3].append(i)
        else:
            runs.append([st, a, b, [i]])
        i = end[i]
    fid = flow_base
    for st, a, b, idx in runs:
        yield _slice(pid, tid, st, CAT_STAGE, a, b, {"stage": st, "pass": ps, "ops": len(idx),
                                                     "first_op": L.names[idx[0]], "call": c.id})
        for j in idx if flows else ():
            fid += 1
            t = min(max(_ns(ts[j]), a), b)
            op_pid, op_tid = L.thread_of(j)
            yield {"ph": "s", "id": fid, "pid": pid, "tid": tid, "ts": _us(t), "name": "tb-attn stage", "cat": CAT_FLOW}
            yield {"ph": "f", "bp": "e", "id": fid, "pid": op_pid, "tid": op_tid, "ts": ts[j],
                   "name": "tb-attn stage", "cat": CAT_FLOW}


def _slice(pid: int, tid: int, name: str, cat: str, a: int, b: int, args: dict) -> dict[str, Any]:
    return {"ph": "X", "pid": pid, "tid": tid, "ts": _us(a), "dur": _us(b - a), "name": name, "cat": cat, "args": args}


def _score_counter(pid: int, spans: list[tuple[int, int, int]], name: str) -> Iterator[dict[str, Any]]:
    """Bytes of score matrices live at each moment, from (start ns, end ns, bytes) spans."""
    deltas: dict[int, int] = {}
    for a, b, n in spans:
        deltas[a] = deltas.get(a, 0) + n
        deltas[b] = deltas.get(b, 0) - n
    live = 0
    for t in sorted(deltas):
        live += deltas[t]
        yield {"ph": "C", "pid": pid, "tid": 0, "ts": _us(t), "name": name, "args": {"bytes": max(live, 0)}}


def _free_pid(L: Linked) -> int:
    used = {L.threads[t][0] for t in set(L.thread)} | {k.pid for k in L.kernels}
    pid = 0x7A_77  # "tb-attn" track; any pid the trace does not use
    while pid in used or str(pid) in used:
        pid += 1
    return pid


def annotate(src: str, dst: str, progress=None) -> dict[str, Any]:
    """Analyse ``src`` and write the annotated copy to ``dst``; returns a summary. Raises TraceError."""
    from ..format.errors import TraceError

    keep: dict[str, Any] = {}
    say = progress or (lambda phase, frac: None)
    # The analysis is the first 60% of the bar, the copy the rest (its "done" comes at the very end).
    report = analyze_file(src, lambda phase, frac: say(phase, 0.6 * frac) if phase != "done" else None, keep=keep)
    if report["trace"].get("truncated"):
        raise TraceError(src, "the trace is incomplete (it ends early); annotate needs the whole file")
    L, calls = keep["L"], keep["calls"]
    pid = _free_pid(L)
    counts = {"call_slices": 0, "stage_slices": 0, "flows": 0, "counters": 0}

    def encoded():
        for ev in events(L, calls, keep["call_of"], keep["measured"], pid, keep["events"]):
            ph, cat = ev["ph"], ev.get("cat")
            if ph == "X":
                counts["call_slices" if cat == CAT_CALL else "stage_slices"] += 1
            elif ph == "s":
                counts["flows"] += 1
            elif ph == "C":
                counts["counters"] += 1
            yield json.dumps(ev, separators=(",", ":"), default=str).encode()

    added = write_spliced(src, dst, encoded(), lambda frac: say("writing", 0.6 + 0.399 * frac))
    say("done", 1.0)
    return {"path": dst, "pid": pid, "calls": report["calls"], "events_added": added, **counts}
