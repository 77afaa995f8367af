"""Which attention call and stage each allocation belongs to.

Profiler events: the innermost op of a call (forward, or backward joined to its forward layer
through autograd links) whose time window on the same thread holds the event. Snapshots: the
collector's ``tb_attn::call`` / ``tb_attn::stage`` record_function spans that the allocator
recorded as ``external_annotations``, by time.
"""

from __future__ import annotations

import bisect
from array import array
from itertools import compress
from dataclasses import dataclass
from typing import Any

from ..collector import tags
from .snapshot import Annotation
from .timeline import Timeline


@dataclass(frozen=True)
class Slot:
    call: int  # index into the owner's call list
    stage: str
    pass_: str  # fwd | bwd


@dataclass
class Attribution:
    slot: array  # per timeline event: index into slots, -1 outside attention
    slots: list[Slot]


def from_trace(tl: Timeline, L, calls, call_of: list[int], stage_of: list[str | None],
               in_calls: list[int]) -> Attribution:
    """Attribute a profiler Timeline to the calls found in the trace it came from (``in_calls``: the
    ops in some call, detect.members)."""
    n = len(tl)
    slot = array("q", [-1]) * n
    depth_at = array("q", [-1]) * n
    slots: list[Slot] = []
    slot_ix: dict[Slot, int] = {}
    thread_of = {key: i for i, key in enumerate(tl.threads)}
    per_thread = _by_thread(tl)
    ops, depth, node_of = L.ops, L.depth, L.node_of
    raw_thread: dict[tuple, int | None] = {}  # (pid, tid) as decoded -> thread: str() once per thread
    key_ix: dict[tuple, int] = {}  # (call, stage, pass) -> slot: a Slot is built once per slot
    for j in in_calls:
        c = call_of[j]
        e = ops[j]
        raw = (e.pid, e.tid)
        th = raw_thread.get(raw, -1)
        if th == -1:
            th = raw_thread[raw] = thread_of.get((str(e.pid), str(e.tid)))
        if th is None:
            continue
        times, idx = per_thread[th]
        a = bisect.bisect_left(times, e.ts)
        b = bisect.bisect_right(times, e.ts + e.dur)
        if a == b:
            continue
        key = (c, stage_of[j] or "other", "bwd" if node_of[j] >= 0 else "fwd")
        k = key_ix.get(key)
        if k is None:
            s = Slot(*key)
            k = slot_ix.get(s)
            if k is None:
                k = slot_ix[s] = len(slots)
                slots.append(s)
            key_ix[key] = k
        d = depth[j]
        for i in idx[a:b]:
            if d > depth_at[i]:
                depth_at[i] = d
                slot[i] = k
    return Attribution(slot, slots)


def _by_thread(tl: Timeline) -> dict[int, tuple[list[float], list[int]]]:
    """Per thread index: its events' times and indices, in timeline order. A trace's memory events
    come from a few threads, so each is picked out at C speed (compress) rather than event by event."""
    n = len(tl)
    threads = set(tl.thread)
    if len(threads) <= MAX_PICKED_THREADS:
        out = {}
        for th in threads:
            mask = list(map(th.__eq__, tl.thread))
            out[th] = (list(compress(tl.t, mask)), list(compress(range(n), mask)))
        return out
    out = {}
    for i, th, t in zip(range(n), tl.thread, tl.t):
        got = out.get(th)
        if got is None:
            got = out[th] = ([], [])
        got[0].append(t)
        got[1].append(i)
    return out


MAX_PICKED_THREADS = 16  # beyond this many threads one pass over the events is faster


@dataclass
class AnnotatedCall:
    """A call known only from its snapshot annotation (no trace): its tag's fields."""

    id: int
    layer: str
    start_us: float
    end_us: float
    info: dict[str, Any]


def from_annotations(tl: Timeline, annotations: list[Annotation]) -> tuple[Attribution, list[AnnotatedCall]]:
    """Attribute a snapshot Timeline by the tb_attn call and stage spans it recorded."""
    calls: list[AnnotatedCall] = []
    stages: list[tuple[float, float, str]] = []
    parsed: dict[str, dict | None] = {}  # a layer's tag repeats every step: parse each name once
    for a in annotations:
        fields = parsed.get(a.name, False)
        if fields is False:
            fields = parsed[a.name] = tags.parse_call(a.name)
        if fields is not None and fields.get("layer"):
            calls.append(AnnotatedCall(len(calls), str(fields["layer"]), a.start_us, a.end_us, fields))
            continue
        st = tags.parse_stage(a.name)
        if st is not None:
            stages.append((a.start_us, a.end_us, st))
    n = len(tl)
    slot = array("q", [-1]) * n
    slots: list[Slot] = []
    slot_ix: dict[Slot, int] = {}
    times = tl.t
    # Innermost wins: calls sorted by start, later (inner) spans overwrite earlier (outer) ones.
    stage_at: list[str | None] = [None] * n if stages else []
    for s0, s1, st in sorted(stages):
        for i in range(bisect.bisect_left(times, s0), bisect.bisect_right(times, s1)):
            stage_at[i] = st
    for c in calls:
        for i in range(bisect.bisect_left(times, c.start_us), bisect.bisect_right(times, c.end_us)):
            s = Slot(c.id, (stage_at[i] if stages else None) or "other", "fwd")
            k = slot_ix.get(s)
            if k is None:
                k = slot_ix[s] = len(slots)
                slots.append(s)
            slot[i] = k
    return Attribution(slot, slots), calls
