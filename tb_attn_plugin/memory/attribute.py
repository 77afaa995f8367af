"""Which attention call and stage each allocation belongs to.

Profiler events: the innermost op of a call (forward, or backward joined to its forward layer
through autograd links) whose time window on the same thread holds the event. Snapshots: the
collector's ``tb_attn::call`` / ``tb_attn::stage`` record_function spans that the allocator
recorded as ``external_annotations``, by time.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass
from typing import Any

from ..format import tags
from ..trace import columns
from .snapshot import Annotation
from .timeline import Timeline


try:  # each event's innermost call op at C speed (trace/_nest.c); from_trace's loop computes the same
    from ..trace._nest import innermost as _c_innermost
except ImportError:
    _c_innermost = None


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
    # The link's threads as the timeline numbers them (-1: a thread without memory events).
    thread_of = {key: i for i, key in enumerate(tl.threads)}
    block_thread = array("q", [thread_of.get((str(pid), str(tid)), -1) for pid, tid in L.threads])
    got = _innermost_c(tl, L, in_calls, block_thread)
    winner, touched = got if got is not None else _innermost_python(tl, L, in_calls, block_thread)
    # One slot per (call, stage, pass), numbered in the order of the ops that hold events.
    ids, keys = columns.factorize(list(touched), (call_of, stage_of, L.bwd), "other")
    slots = [Slot(c, st, "bwd" if b else "fwd") for c, st, b in keys]
    op_slot = dict(zip(touched, ids.tolist()))
    op_slot[-1] = -1
    return Attribution(array("q", map(op_slot.__getitem__, winner)), slots)


def _innermost_python(tl: Timeline, L, in_calls: list[int], block_thread: array) -> tuple[list[int], list[int]]:
    """_innermost_c's result in Python (the C helper is tested against it): each call op, in order,
    takes the events of its thread inside its window when it is deeper than the op they have."""
    n = len(tl)
    winner = [-1] * n
    depth_at = [-1] * n
    touched: list[int] = []
    per_thread = _by_thread(tl)
    ts, dur, op_block, depth = L.ts, L.dur, L.thread, L.depth
    for j in in_calls:
        got = per_thread.get(block_thread[op_block[j]])
        if got is None:  # a thread without memory events
            continue
        times, idx = got
        a = bisect.bisect_left(times, ts[j])
        b = bisect.bisect_right(times, ts[j] + dur[j])
        if a == b:
            continue
        touched.append(j)
        d = depth[j]
        for i in idx[a:b]:
            if d > depth_at[i]:
                depth_at[i] = d
                winner[i] = j
    return winner, touched


def _innermost_c(tl: Timeline, L, in_calls: list[int], block_thread: array) -> tuple[array, array] | None:
    """(winning op per event, the ops whose window held any event) from _nest.innermost: the loop of
    from_trace at C speed. None without the helper, or when a column is not a float or int array
    (ops built in Python may carry int times, which the Python loop keeps as they are)."""
    cols = (tl.t, tl.thread, L.ts, L.dur, L.thread, L.depth)
    if _c_innermost is None or [getattr(c, "typecode", None) for c in cols] != ["d", "q", "d", "d", "q", "q"]:
        return None
    winner, touched = _c_innermost(tl.t, tl.thread, len(tl.threads), array("q", in_calls), L.ts, L.dur, L.thread,
                                   block_thread, L.depth)
    return array("q", winner), array("q", touched)


def _by_thread(tl: Timeline) -> dict[int, tuple[list[float], list[int]]]:
    """Per thread index: its events' times and indices, in timeline order."""
    out: dict[int, tuple[list[float], list[int]]] = {}
    for i, th, t in zip(range(len(tl)), tl.thread, tl.t):
        got = out.get(th)
        if got is None:
            got = out[th] = ([], [])
        got[0].append(t)
        got[1].append(i)
    return out


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
