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
a synchronising call (rules.SYNC_CALLS) is waiting on a synchronisation; of the rest, the part of a gap
after the launch call of the activity that ends the gap had returned is kernel wait (HTA's: the host
had already issued the next work, the GPU sat between kernels), and the remainder waiting on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..trace.events import CATS
from ..format.linear_regex import compile_linear
from ..table import columns
from ..table.arrays import floats, ints
from ..attention import patterns
from . import intervals as iv
from . import rules

PRECEDENCE = ("attention_fwd", "attention_bwd", "other_matmul", "other_compute", "communication", "memcpy", "memset")
COMPUTE = 4  # the first four parts are compute: communication under them is hidden
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
_ATT_FWD, _ATT_BWD, _MATMUL, _OTHER, _COMM, _MEMCPY, _MEMSET = range(7)


_GEMM = compile_linear(next(f.pattern for f in patterns.KERNEL_FAMILIES if f.family == "gemm"))


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
    step None for a trace without step markers. Every figure of every step comes from a handful of
    grouped unions (intervals.lengths_by_group), never a pass per step."""
    part, direction = classify(L, m)
    ts = L.kernel_ts if len(L.kernels) else np.zeros(0)
    dur = floats(L.kernel_dur) if len(L.kernels) else np.zeros(0)
    end = ts + dur
    kt = L.kernel_table
    stream = np.where(kt.has("stream"), kt["stream"], -1) if kt is not None and len(ts) else np.full(len(ts), -1)

    # Host side: synchronising calls, data loading and optimizer ops, as intervals.
    lt = ev.launch_table
    l_ts, l_dur = floats(lt["ts"]), floats(lt["dur"])
    issued = _launch_end(kt, lt, l_ts + l_dur, len(ts))
    sync_s, sync_e = _named_intervals(ev.launch_names.values, np.asarray(ev.launch_names.ids), l_ts, l_dur,
                                      rules.SYNC_CALLS, "sync")
    op_ts, op_dur = floats(L.ts), floats(L.dur)
    host = {}
    for r in ("data_loading", "optimizer"):  # the ops by name, asked once per distinct name (Linked.where_name)
        at = np.asarray(L.where_name(rules.role_pattern(rules.HOST_OPS, r).search) if len(L.names) else [], np.int64)
        host[r] = (op_ts[at], op_ts[at] + op_dur[at])

    if L.steps:
        ids = sorted(L.steps)
        step = _step_of_activities(L, ts)
        pos = np.searchsorted(np.array(ids, np.int64), step)
        found = pos < len(ids)
        found[found] = np.array(ids, np.int64)[pos[found]] == step[found]
        group = np.where(found, pos, -1)  # each activity's row; -1: in no step
        h_lo = np.array([L.steps[s][0] for s in ids])
        h_hi = np.array([L.steps[s][1] for s in ids])
        labels: list[int | None] = list(ids)
    else:
        group = np.zeros(len(ts), np.int64)
        lo = float(op_ts.min()) if len(op_ts) else (float(ts.min()) if len(ts) else 0.0)
        hi = float((op_ts + op_dur).max()) if len(op_ts) else (float(end.max()) if len(ts) else 0.0)
        h_lo, h_hi, labels = np.array([lo]), np.array([hi]), [None]
    G = len(labels)
    keep = group >= 0
    g, part, direction, s0, e0, stream = group[keep], part[keep], direction[keep], ts[keep], end[keep], stream[keep]
    fig = _gpu_figures(g, part, direction, s0, e0, stream, G, sync_s, sync_e, issued[keep])
    data = {r: iv.lengths_by_group(*iv.overlapping(h_lo, h_hi, a, b), G).tolist() for r, (a, b) in host.items()}
    host_us, h_end = (h_hi - h_lo).tolist(), h_hi.tolist()

    rows = []
    for k, s in enumerate(labels):
        row = _row(fig, k)
        lost = unrecorded_by_step.get(s if s is not None else -1, 0) if L.steps else sum(unrecorded_by_step.values())
        if lost:  # kernels of this step were never recorded: the gaps are not known to be idle
            row["unrecorded_launches"] = lost
            if row["gpu_span_us"] is not None:
                row["parts"][-1]["part"] = "not_recorded"
                row["idle_us"] = row["idle_host_us"] = row["idle_sync_us"] = row["idle_kernel_us"] = None
        row.update(step=s, label=f"ProfilerStep#{s}" if s is not None else "whole trace",
                   host_us=round(host_us[k], 3))
        for r in host:
            row[f"{r}_us"] = round(data[r][k], 3)
        row["gpu_end_after_host_us"] = round(fig["end"][k] - h_end[k], 3) if fig["count"][k] else None
        rows.append(row)
    return rows


def _ids_known(t) -> np.ndarray:
    """Whether each row of ``t`` has a correlation id an int64 holds: the column is one of Python ints
    (objects) where a bent trace wrote an id past int64, which no activity of the trace can carry."""
    has = np.asarray(t.has("correlation"), bool)
    col = t["correlation"]
    if col.dtype == object:
        has = has & np.fromiter((type(c) is int and -(1 << 63) <= c < 1 << 63 for c in col), bool, len(col))
    return has


def _launch_end(kt, lt, l_end: np.ndarray, n: int) -> np.ndarray:
    """Each activity's launch call's end (the host had issued it by then), by correlation id; NaN where
    the trace has no launch for it (a later launch of one id wins, as link.launches_by_correlation)."""
    out = np.full(n, np.nan)
    if not n or kt is None or not len(l_end):
        return out
    lhas, khas = _ids_known(lt), _ids_known(kt)
    if not lhas.any() or not khas.any():
        return out
    lc = np.asarray(lt["correlation"][lhas], np.int64)[::-1]
    le = l_end[lhas][::-1]
    keys, first = np.unique(lc, return_index=True)  # reversed: the first of each id is the file's last
    kc = np.asarray(kt["correlation"][khas], np.int64)
    at = np.minimum(np.searchsorted(keys, kc), len(keys) - 1)
    found = keys[at] == kc
    vals = np.full(len(kc), np.nan)
    vals[found] = le[first[at[found]]]
    out[np.flatnonzero(khas)] = vals
    return out


def _kernel_wait(g, start, end, issued, G: int):
    """(step, start, end) of each stretch of idle before an activity whose launch had already returned:
    for each gap in a step's union [a, b), the part after max(a, the launch's end) of the activity
    starting at b."""
    if len(start) < 2:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    order = np.lexsort((np.where(np.isnan(issued), np.inf, issued), start, g))  # ties: the earliest issued first
    gs, s, e, le = g[order], start[order], end[order], issued[order]
    first = np.full(G, np.inf)
    np.minimum.at(first, gs, s)
    band = float((e - first[gs]).max()) + 1.0
    shift = gs * band - first[gs]  # each step in a band of its own: a running max never crosses steps
    reach = np.maximum.accumulate(e + shift)
    same = gs[1:] == gs[:-1]
    a = reach[:-1] - shift[1:]
    b = s[1:]
    lo = np.maximum(a, le[1:])
    keep = same & (b > a) & ~np.isnan(le[1:]) & (b > lo)
    return gs[1:][keep], lo[keep], b[keep]


def _gpu_figures(g, part, direction, start, end, stream, G: int, sync_s, sync_e, issued) -> dict[str, Any]:
    """Each step's GPU figures as arrays over the steps (g: each activity's step row)."""
    by = iv.lengths_by_group
    count = np.bincount(g, minlength=G)
    lo, hi = np.full(G, np.inf), np.full(G, -np.inf)
    np.minimum.at(lo, g, start)
    np.maximum.at(hi, g, end)
    span = np.where(count > 0, hi - lo, 0.0)
    cum = [by(g[part <= k], start[part <= k], end[part <= k], G) for k in range(len(PRECEDENCE))]
    busy = cum[-1]
    # idle under a synchronising call: |busy ∪ (sync ∩ span)| - |busy|, per step
    w, ss, se = iv.overlapping(np.where(count > 0, lo, 0.0), np.where(count > 0, hi, 0.0), sync_s, sync_e)
    with_sync = by(np.concatenate([g, w]), np.concatenate([start, ss]), np.concatenate([end, se]), G)
    # kernel wait: idle before already-issued work, outside the sync calls (those are sync wait)
    kg, ks, ke = _kernel_wait(g, start, end, issued, G)
    known = np.bincount(g, ~np.isnan(issued), minlength=G) > 0  # a step none of whose work has a launch: unknown
    with_kernel = by(np.concatenate([g, w, kg]), np.concatenate([start, ss, ks]), np.concatenate([end, se, ke]), G)
    one = {name: by(g[part == k], start[part == k], end[part == k], G)
           for name, k in (("communication", _COMM), ("memcpy", _MEMCPY), ("memset", _MEMSET))}
    # memcpy by direction and busy by stream: grouped by (step, key)
    nd = len(rules.MEMCPY_DIRECTIONS) + 1  # the last: a copy no direction row names
    copy = part == _MEMCPY
    dkey = g[copy] * nd + np.where(direction[copy] >= 0, direction[copy], nd - 1)
    d_us = by(dkey, start[copy], end[copy], G * nd).reshape(G, nd)
    d_n = np.bincount(dkey, minlength=G * nd).reshape(G, nd)
    sids = sorted(set(stream.tolist()))
    sidx = np.searchsorted(np.array(sids, np.int64), stream) if len(sids) else np.zeros(0, np.int64)
    skey = g * max(len(sids), 1) + sidx
    s_us = by(skey, start, end, G * max(len(sids), 1)).reshape(G, -1)
    s_n = np.bincount(skey, minlength=G * max(len(sids), 1)).reshape(G, -1)
    # Every figure as an array over the steps, rounded at C speed (columns.rounded: round(x, 3) to the
    # bit), then as Python lists: each step's row only picks its values.
    parts = [np.maximum(cum[0], 0.0)] + [np.maximum(cum[k] - cum[k - 1], 0.0) for k in range(1, len(cum))]
    parts.append(np.maximum(span - busy, 0.0))
    idle_sync = with_sync - busy
    exposed = cum[_COMM] - cum[_COMM - 1]
    safe = np.where(span > 0, span, 1.0)
    return {"count": count.tolist(), "lo": _r3(lo), "end": hi.tolist(), "span": _r3(span), "busy": _r3(busy),
            "parts": [_r3(p) for p in parts], "shares": [columns.rounded(p / safe, 6) for p in parts],
            "idle": _r3(span - busy), "idle_host": _r3(np.maximum(span - np.where(known, with_kernel, with_sync), 0.0)),
            "idle_sync": _r3(idle_sync),
            "idle_kernel": [v if k else None for v, k in zip(_r3(with_kernel - with_sync), known.tolist())],
            "comm": _r3(one["communication"]), "exposed": _r3(exposed), "hidden": _r3(one["communication"] - exposed),
            "memcpy": _r3(one["memcpy"]), "memset": _r3(one["memset"]),
            "d_us": np.array(_r3(d_us)).reshape(G, nd).tolist(), "d_n": d_n.tolist(), "sids": sids,
            "s_us": np.array(_r3(s_us)).reshape(G, -1).tolist(), "s_n": s_n.tolist()}


def _r3(a) -> list[float]:
    """round(x, 3) of each value, at C speed (columns.rounded), as a list."""
    return columns.rounded(np.asarray(a, np.float64).ravel())


def _row(f: dict[str, Any], k: int) -> dict[str, Any]:
    """Step row k's GPU figures (StepBreakdown's); unknown (None) where it ran nothing on the GPU."""
    if not f["count"][k]:
        return {"gpu_start_us": None, "gpu_span_us": None, "busy_us": None, "parts": [], "idle_us": None,
                "idle_host_us": None, "idle_sync_us": None, "idle_kernel_us": None, "communication_us": None,
                "communication_exposed_us": None, "communication_hidden_us": None, "memcpy_us": None,
                "memcpy_by_direction": [], "memset_us": None, "activities": 0, "streams": []}
    span = f["span"][k]
    parts = [{"part": name, "us": us[k], "share": sh[k] if span > 0 else None}
             for name, us, sh in zip(PRECEDENCE + ("idle",), f["parts"], f["shares"])]
    names = [r.role for r in rules.MEMCPY_DIRECTIONS] + ["other"]
    d_us, d_n, s_us, s_n = f["d_us"][k], f["d_n"][k], f["s_us"][k], f["s_n"][k]
    by_dir = [{"direction": names[d], "us": d_us[d], "count": d_n[d]} for d in range(len(names)) if d_n[d]]
    streams = [{"stream": int(sid) if sid >= 0 else None, "busy_us": s_us[j], "activities": s_n[j]}
               for j, sid in enumerate(f["sids"]) if s_n[j]]
    streams.sort(key=lambda r: -r["busy_us"])
    return {"gpu_start_us": f["lo"][k], "gpu_span_us": span, "busy_us": f["busy"][k], "parts": parts,
            "idle_us": f["idle"][k], "idle_host_us": f["idle_host"][k], "idle_sync_us": f["idle_sync"][k],
            "idle_kernel_us": f["idle_kernel"][k], "communication_us": f["comm"][k], "communication_exposed_us": f["exposed"][k],
            "communication_hidden_us": f["hidden"][k], "memcpy_us": f["memcpy"][k], "memcpy_by_direction": by_dir,
            "memset_us": f["memset"][k], "activities": f["count"][k], "streams": streams[:16]}
