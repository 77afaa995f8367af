"""Which attention call and stage each allocation belongs to.

Profiler events: the innermost op of a call (forward, or backward joined to its forward layer
through autograd links) whose time window on the same thread holds the event. Snapshots: the
collector's ``tb_attn::call`` / ``tb_attn::stage`` record_function spans that the allocator
recorded as ``external_annotations``, by time.
"""

from __future__ import annotations

import bisect
from array import array
from functools import partial
from itertools import compress, repeat
from operator import add, itemgetter, lt
from dataclasses import dataclass
from typing import Any

from ..collector import tags
from ..trace import link as _link
from .snapshot import Annotation
from .timeline import Timeline


_c_innermost = getattr(_link._c_nest, "innermost", None)  # trace/_nest.c, when built


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
    depth, node_of = L.depth, L.node_of
    key_ix: dict[tuple, int] = {}  # (call, stage, pass) -> slot: a Slot is built once per slot

    def slot_of(j: int) -> int:
        key = (call_of[j], stage_of[j] or "other", "bwd" if node_of[j] >= 0 else "fwd")
        k = key_ix.get(key)
        if k is None:
            s = Slot(*key)
            k = slot_ix.get(s)
            if k is None:
                k = slot_ix[s] = len(slots)
                slots.append(s)
            key_ix[key] = k
        return k

    fast = _innermost_c(tl, L, in_calls)
    if fast is not None:
        winner, touched = fast
        op_slot = {j: slot_of(j) for j in touched}  # in op order: slots are numbered as below
        op_slot[-1] = -1
        return Attribution(array("q", map(op_slot.__getitem__, winner)), slots)
    for j, idx, a, b in _windows(tl, L, in_calls):
        k = slot_of(j)
        d = depth[j]
        for i in idx[a:b]:
            if d > depth_at[i]:
                depth_at[i] = d
                slot[i] = k
    return Attribution(slot, slots)


def _innermost_c(tl: Timeline, L, in_calls: list[int]) -> tuple[array, array] | None:
    """(winning op per event, the ops whose window held any event) from _nest.innermost: the loop of
    from_trace at C speed. None without the helper, or when a column is not a float or int array
    (ops built in Python may carry int times, which the Python loop keeps as they are)."""
    cols = (tl.t, tl.thread, L.ts, L.dur, L.thread, L.depth)
    if _c_innermost is None or [getattr(c, "typecode", None) for c in cols] != ["d", "q", "d", "d", "q", "q"]:
        return None
    thread_of = {key: i for i, key in enumerate(tl.threads)}
    block_thread = array("q", [thread_of.get((str(pid), str(tid)), -1) for pid, tid in L.threads])
    winner, touched = _c_innermost(tl.t, tl.thread, len(tl.threads), array("q", in_calls), L.ts, L.dur, L.thread,
                                   block_thread, L.depth)
    return array("q", winner), array("q", touched)


def _windows(tl: Timeline, L, in_calls: list[int]) -> list[tuple[int, list[int], int, int]]:
    """(op, its thread's event indices, first, end) for each call op whose time window holds some
    of its thread's memory events (indices idx[first:end]), in op order. Most call ops hold none;
    finding which (thread, both bisections) runs at C speed over the op columns, thread by thread."""
    per_thread = _by_thread(tl)
    thread_of = {key: i for i, key in enumerate(tl.threads)}
    # The link's threads, as the timeline numbers them (-1: a thread without memory events).
    th_of = [thread_of.get((str(pid), str(tid)), -1) for pid, tid in L.threads]
    ths = list(map(th_of.__getitem__, map(L.thread.__getitem__, in_calls)))
    starts = list(map(L.ts.__getitem__, in_calls))
    ends = list(map(add, starts, map(L.dur.__getitem__, in_calls)))
    found: list[tuple[int, list[int], int, int]] = []
    if len(per_thread) > MAX_PICKED_THREADS:  # many threads: one pass over the ops is faster
        for j, th, t0, t1 in zip(in_calls, ths, starts, ends):
            if th >= 0:
                times, idx = per_thread[th]
                a, b = bisect.bisect_left(times, t0), bisect.bisect_right(times, t1)
                if a < b:
                    found.append((j, idx, a, b))
        return found
    for th, (times, idx) in per_thread.items():
        mine = list(map(th.__eq__, ths))
        firsts = list(map(partial(bisect.bisect_left, times), compress(starts, mine)))
        stops = list(map(partial(bisect.bisect_right, times), compress(ends, mine)))
        some = list(map(lt, firsts, stops))
        found.extend(zip(compress(compress(in_calls, mine), some), repeat(idx), compress(firsts, some),
                         compress(stops, some)))
    found.sort(key=itemgetter(0))
    return found


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
