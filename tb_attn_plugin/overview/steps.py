"""Each profiler step's GPU span split into parts that sum to it, idle split by what the host did, and
the host's data loading and optimizer time.

A step's GPU span runs from its first GPU activity (kernel, memcpy, memset) to its last; an activity
belongs to the step of the op that launched it, else (no op: graph replays, unlinked kernels) to the
step whose host window holds its start. Without ProfilerStep markers the whole trace is one step.

Parts (docs/api.md): every instant of the span is given to the first of PRECEDENCE that covers it on
any stream, so overlaps across streams never count twice and the parts sum to the span:
attention (fwd, then bwd) > other matmul > other compute > communication > memcpy > memset > idle.
Communication as a part is therefore its *exposed* time (not under any compute kernel); the hidden
rest is reported beside it. Idle = span - union(busy); the part of idle during which the host sat in
a synchronising call (rules.SYNC_CALLS) is waiting on a synchronisation, the rest waiting on the host.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..trace.events import CATS
from ..trace.table import floats, ints
from ..attention import patterns
from . import intervals as iv
from . import rules

PRECEDENCE = ("attention_fwd", "attention_bwd", "other_matmul", "other_compute", "communication", "memcpy", "memset")
COMPUTE = 4  # the first four parts are compute: communication under them is hidden
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
_ATT_FWD, _ATT_BWD, _MATMUL, _OTHER, _COMM, _MEMCPY, _MEMSET = range(7)


_GEMM = re.compile(next(f.pattern for f in patterns.KERNEL_FAMILIES if f.family == "gemm"))


def _name_class(name: str) -> int:
    """A kernel's part by its name alone (outside attention calls): the kernel table's gemm row says matmul."""
    if rules.first_role(rules.COMMUNICATION, name):
        return _COMM
    return _MATMUL if _GEMM.search(name) else _OTHER


def classify(L, m) -> tuple[np.ndarray, np.ndarray]:
    """(each GPU activity's part as an index into PRECEDENCE, its memcpy direction id (-1: not a
    memcpy) into rules.MEMCPY_DIRECTIONS)."""
    n = len(L.kernels)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    kt = L.kernel_table
    cat_names = kt.cats if kt is not None else CATS
    cat_id = kt["cat"] if kt is not None else np.array([cat_names.index(k.cat) for k in L.kernels])
    is_copy = np.array([c in MEMCPY_CATS for c in cat_names], bool)[cat_id]
    is_set = np.array([c in MEMSET_CATS for c in cat_names], bool)[cat_id]
    names = L.kernel_names
    by_name = np.array([_name_class(v) for v in names.values], np.int64)[names.ids]
    dirs = [r.role for r in rules.MEMCPY_DIRECTIONS]
    direction = np.array([dirs.index(d) if (d := rules.first_role(rules.MEMCPY_DIRECTIONS, v)) else -1
                          for v in names.values], np.int64)[names.ids]
    # Attention: the kernel's call as metrics.py found it (its op's slot, else the call holding it),
    # in backward where its slot (or its op) is.
    op = ints(L.kernel_op)
    slot = np.append(m.slot, -1)[op] if len(m.slot) else np.full(n, -1, np.int64)
    slot_call = np.array([c for c, _, _ in m.slot_keys] + [-1], np.int64)
    slot_bwd = np.array([b for _, _, b in m.slot_keys] + [False], bool)
    call = np.where(slot >= 0, slot_call[slot], np.asarray(m.kernel_call, np.int64))
    bwd = np.where(slot >= 0, slot_bwd[slot], np.append(L.bwd_column, False)[op] if len(L.names) else False)
    part = np.where(call >= 0, np.where(bwd, _ATT_BWD, _ATT_FWD), by_name)
    part = np.where(is_copy, _MEMCPY, np.where(is_set, _MEMSET, part))
    return part, np.where(is_copy, direction, -1)


def _step_of_activities(L, starts: np.ndarray) -> np.ndarray:
    """Each activity's step: its op's, else the step whose host window holds its start, else -1."""
    op = ints(L.kernel_op)
    step = np.append(ints(L.step), -1)[op] if len(L.names) else np.full(len(op), -1, np.int64)
    lost = np.flatnonzero(step < 0)
    if len(lost) and L.steps:
        ids = sorted(L.steps, key=lambda s: L.steps[s][0])
        lo = np.array([L.steps[s][0] for s in ids])
        hi = np.array([L.steps[s][1] for s in ids])
        k = np.searchsorted(lo, starts[lost], side="right") - 1
        inside = (k >= 0) & (starts[lost] < hi[np.maximum(k, 0)])
        step[lost[inside]] = np.array(ids, np.int64)[k[inside]]
    return step


def _named_intervals(names: list[str], ids: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                     table: tuple[rules.NameRule, ...], role: str) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the events whose name has ``role`` in ``table``."""
    rx = rules.role_pattern(table, role)
    want = np.array([rx.search(v) is not None for v in names], bool)
    sel = want[ids] if len(ids) else np.zeros(0, bool)
    return ts[sel], ts[sel] + dur[sel]


def breakdown(L, ev, m, unrecorded_by_step: dict[int, int]) -> list[dict[str, Any]]:
    """One row per step (StepBreakdown in format/report/overview.py), in step order; one row with
    step None for a trace without step markers."""
    part, direction = classify(L, m)
    ts = L.kernel_ts if len(L.kernels) else np.zeros(0)
    dur = floats(L.kernel_dur) if len(L.kernels) else np.zeros(0)
    end = ts + dur
    kt = L.kernel_table
    stream = np.where(kt.has("stream"), kt["stream"], -1) if kt is not None and len(ts) else np.full(len(ts), -1)
    step = _step_of_activities(L, ts) if L.steps else np.full(len(ts), -1, np.int64)

    # Host side: synchronising calls, data loading and optimizer ops, as intervals.
    lt = ev.launch_table
    l_ts, l_dur = floats(lt["ts"]), floats(lt["dur"])
    sync_s, sync_e = _named_intervals(ev.launch_names.values, np.asarray(ev.launch_names.ids), l_ts, l_dur,
                                      rules.SYNC_CALLS, "sync")
    op_ts, op_dur = floats(L.ts), floats(L.dur)
    codes, values = L.name_codes() if len(L.names) else (np.zeros(0, np.int64), [])
    host = {r: _named_intervals(values, codes, op_ts, op_dur, rules.HOST_OPS, r) for r in ("data_loading", "optimizer")}

    if L.steps:
        windows = [(s, L.steps[s]) for s in sorted(L.steps)]
    else:
        lo = float(op_ts.min()) if len(op_ts) else (float(ts.min()) if len(ts) else 0.0)
        hi = float((op_ts + op_dur).max()) if len(op_ts) else (float(end.max()) if len(ts) else 0.0)
        windows = [(None, (lo, hi))]
    rows = []
    # Each step's activities as one slice of the activities sorted by step (not a scan per step).
    by_step = np.argsort(step, kind="stable")
    sorted_steps = step[by_step]
    for s, (h_lo, h_hi) in windows:
        if L.steps:
            sel = by_step[np.searchsorted(sorted_steps, s, "left"):np.searchsorted(sorted_steps, s, "right")]
        else:
            sel = np.arange(len(ts))
        row = _gpu_parts(part[sel], direction[sel], ts[sel], end[sel], stream[sel], sync_s, sync_e)
        lost = unrecorded_by_step.get(s if s is not None else -1, 0) if L.steps else sum(unrecorded_by_step.values())
        if lost:  # kernels of this step were never recorded: the gaps are not known to be idle
            row["unrecorded_launches"] = lost
            if row["gpu_span_us"] is not None:
                row["parts"][-1]["part"] = "not_recorded"
                row["idle_us"] = row["idle_host_us"] = row["idle_sync_us"] = None
        row.update(step=s, label=f"ProfilerStep#{s}" if s is not None else "whole trace",
                   host_us=round(h_hi - h_lo, 3))
        for r, (a, b) in host.items():
            a, b = iv.clip(a, b, h_lo, h_hi)
            row[f"{r}_us"] = round(iv.covered(a, b), 3) if len(a) else 0.0
        gpu_end = row.pop("_gpu_end")
        row["gpu_end_after_host_us"] = round(gpu_end - h_hi, 3) if gpu_end is not None else None
        rows.append(row)
    return rows


def _gpu_parts(part, direction, start, end, stream, sync_s, sync_e) -> dict[str, Any]:
    """The GPU figures of one step's activities."""
    if not len(start):
        return {"gpu_start_us": None, "gpu_span_us": None, "busy_us": None, "parts": [], "idle_us": None,
                "idle_host_us": None, "idle_sync_us": None, "communication_us": None,
                "communication_exposed_us": None, "communication_hidden_us": None, "memcpy_us": None,
                "memcpy_by_direction": [], "memset_us": None, "activities": 0, "streams": [], "_gpu_end": None}
    lo, hi = float(start.min()), float(end.max())
    span = hi - lo
    parts, before = [], 0.0
    for k, name in enumerate(PRECEDENCE):  # each part: what its kernels add to the union of those before it
        sel = part <= k
        now = iv.covered(start[sel], end[sel])
        parts.append({"part": name, "us": now - before})
        before = now
    busy = before
    parts.append({"part": "idle", "us": span - busy})
    bs, be = iv.union(start, end)
    s, e = iv.clip(sync_s, sync_e, lo, hi)
    idle_sync = iv.covered(np.concatenate([bs, s]), np.concatenate([be, e])) - busy if len(s) else 0.0
    comm = part == _COMM
    comm_us = iv.covered(start[comm], end[comm])
    exposed = parts[_COMM]["us"]
    copy = part == _MEMCPY
    by_dir = []
    for d, r in enumerate(rules.MEMCPY_DIRECTIONS):
        sel = copy & (direction == d)
        if sel.any():
            by_dir.append({"direction": r.role, "us": round(iv.covered(start[sel], end[sel]), 3), "count": int(sel.sum())})
    sel = copy & (direction < 0)
    if sel.any():
        by_dir.append({"direction": "other", "us": round(iv.covered(start[sel], end[sel]), 3), "count": int(sel.sum())})
    memset = part == _MEMSET
    streams = []
    for sid in sorted(set(stream.tolist())):  # np.unique would import numpy.ma (tens of ms) on first use
        sel = stream == sid
        streams.append({"stream": int(sid) if sid >= 0 else None, "busy_us": round(iv.covered(start[sel], end[sel]), 3),
                        "activities": int(sel.sum())})
    streams.sort(key=lambda r: -r["busy_us"])
    for p in parts:
        p["us"] = round(p["us"], 3)
        p["share"] = round(p["us"] / span, 6) if span > 0 else None
    return {"gpu_start_us": round(lo, 3), "gpu_span_us": round(span, 3), "busy_us": round(busy, 3), "parts": parts,
            "idle_us": round(span - busy, 3), "idle_host_us": round(span - busy - idle_sync, 3),
            "idle_sync_us": round(idle_sync, 3), "communication_us": round(comm_us, 3),
            "communication_exposed_us": round(exposed, 3), "communication_hidden_us": round(comm_us - exposed, 3),
            "memcpy_us": round(iv.covered(start[copy], end[copy]), 3), "memcpy_by_direction": by_dir,
            "memset_us": round(iv.covered(start[memset], end[memset]), 3), "activities": int(len(start)),
            "streams": streams[:16], "_gpu_end": hi}
