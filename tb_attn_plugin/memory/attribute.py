"""Which attention call and stage each allocation belongs to.

Profiler events: the innermost op of a call (forward, or backward joined to its forward layer
through autograd links) whose time window on the same thread holds the event. Snapshots: the
collector's ``tb_attn::call`` / ``tb_attn::stage`` record_function spans that the allocator
recorded as ``external_annotations``, by time.
"""

from __future__ import annotations

import bisect
from array import array
from typing import Any, NamedTuple, Sequence

import msgspec
import numpy as np

from ..format import tags
from ..table import columns
from ..table.arrays import as_array, floats, ints
from .snapshot import Annotation
from .timeline import Timeline


class Slot(NamedTuple):  # immutable and hashable, and made at C speed (a trace has thousands)
    call: int  # index into the owner's call list
    stage: str
    pass_: str  # fwd | bwd


class Attribution(msgspec.Struct):
    slot: array  # per timeline event: index into slots, -1 outside attention
    slots: list[Slot]
    op: np.ndarray | None = None  # per timeline event: the innermost call op around it (traces), -1 none


def from_trace(tl: Timeline, L, slots: tuple, in_calls: Sequence[int]) -> Attribution:
    """Attribute a profiler Timeline to the calls found in the trace it came from (``slots``: each
    op's (call, stage, pass) id and the ids' keys, Measured.slot and slot_keys; ``in_calls``: the
    ops in some call, detect.members)."""
    # The link's threads as the timeline numbers them (-1: a thread without memory events).
    thread_of = {key: i for i, key in enumerate(tl.threads)}
    block_thread = array("q", [thread_of.get((str(pid), str(tid)), -1) for pid, tid in L.threads])
    winner, touched = _innermost(tl, L, in_calls, block_thread)
    # One slot per (call, stage, pass), numbered in the order of the ops that hold events.
    slot, slot_keys = slots
    ids, keys = columns.factorize(touched, (slot,))
    slots = [Slot(c, st, "bwd" if b else "fwd") for c, st, b in map(slot_keys.__getitem__, keys)]
    op_slot = np.full(len(L.names) + 1, -1, np.int64)  # the last one: no op's (-1) events
    op_slot[touched] = ids
    return Attribution(as_array("q", op_slot[winner]), slots, winner)


PAIRS_PER_BATCH = 1 << 22  # (op, event) pairs held at once: bounds the memory of a wide window


def _innermost(tl: Timeline, L, in_calls: Sequence[int], block_thread: array) -> tuple[np.ndarray, list[int]]:
    """(winning op per event (int64), -1 for none; the ops whose window held any event, in order): each
    call op, in order, takes the events of its thread inside its window [ts, ts + dur] when it is
    deeper than the op they have, so the deepest wins and, of equally deep ones, the first."""
    n = len(tl)
    ops = np.asarray(in_calls, np.int64) if len(in_calls) else np.zeros(0, np.int64)
    thread = ints(block_thread)[ints(L.thread)[ops]] if len(ops) and len(block_thread) else np.full(len(ops), -1)
    start = floats(L.ts)[ops]
    end = start + floats(L.dur)[ops]
    # Each thread's events in time order (the timeline is sorted by time): a window is a range there.
    by_thread = np.argsort(ints(tl.thread), kind="stable") if n else np.zeros(0, np.int64)
    times = floats(tl.t)[by_thread]
    at = np.searchsorted(ints(tl.thread)[by_thread], np.arange(len(tl.threads) + 1))
    lo, hi = np.zeros(len(ops), np.int64), np.zeros(len(ops), np.int64)
    for k in sorted(set(thread[thread >= 0].tolist())):  # not np.unique: it imports numpy.ma (~6 ms) on first use
        mine = np.flatnonzero(thread == k)
        seg = times[at[k]:at[k + 1]]
        lo[mine] = at[k] + np.searchsorted(seg, start[mine], "left")
        hi[mine] = at[k] + np.searchsorted(seg, end[mine], "right")
    held = np.flatnonzero(hi > lo)
    # The ops ranked deepest first, then by their order in in_calls: an event goes to the least rank.
    depth = ints(L.depth)[ops[held]]
    by_rank = np.lexsort((held, -depth))
    rank = np.empty(len(held), np.int64)
    rank[by_rank] = np.arange(len(held))
    best = np.full(n, len(held), np.int64)
    size = hi[held] - lo[held]
    done = 0
    while done < len(held):  # a batch of windows at a time, each expanded into its events
        stop = done + 1 + int(np.searchsorted(np.cumsum(size[done:]), PAIRS_PER_BATCH, "right"))
        w = slice(done, min(stop, len(held)))
        count = size[w]
        first = np.cumsum(count) - count
        pos = np.arange(int(count.sum())) - np.repeat(first - lo[held][w], count)
        np.minimum.at(best, by_thread[pos], np.repeat(rank[w], count))
        done = w.stop
    op_of_rank = np.append(ops[held][by_rank], -1)
    return op_of_rank[best], ops[held].tolist()


class AnnotatedCall(msgspec.Struct):
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
