"""The report's ``gpu_window``: kernel launches whose kernels the trace lacks (trace/window.py), the
calls, layers and steps that lost them, and words for it: their GPU time is "not recorded", not 0 µs;
and ``before_window``: GPU activity from before the window, listed apart from its calls."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..attention.detect import Call
from ..trace.link import Linked

MAX_CALL_ROWS = 100


def build(report: dict[str, Any], L: Linked, calls: list[Call], call_of: list[int], m) -> dict[str, Any]:
    """``before_window`` and ``gpu_window`` (None when every launch's kernel was recorded); marks the
    report's layers, steps and sampled calls whose GPU time is a lower bound (``gpu_unrecorded_calls``,
    ``unrecorded_launches``, ``gpu_recorded``) and adds the warnings."""
    part = {"before_window": _before(report["warnings"], L), "gpu_window": None}
    lost = L.unrecorded
    if lost is None:
        return part
    per_call: Counter = Counter()
    per_step: Counter = Counter()
    outside = 0
    for op in lost.ops:
        c = call_of[op] if op >= 0 else -1
        if c >= 0:
            per_call[c] += 1
        else:
            outside += 1
        per_step[L.step[op] if op >= 0 else -1] += 1
    by_id = {c.id: c for c in calls}
    rows = []
    for cid, n in sorted(per_call.items(), key=lambda kv: (by_id[kv[0]].step, by_id[kv[0]].start)):
        call = by_id[cid]
        recorded = sum(x.kernels for x in m.cells[cid].values())
        rows.append({"id": cid, "layer": call.layer, "step": call.step, "unrecorded_launches": n,
                     "recorded": "partly" if recorded else "none"})
    none = [r for r in rows if r["recorded"] == "none"]
    by_layer: Counter = Counter(r["layer"] for r in rows)
    for lay in report["layers"]:
        if lay.layer in by_layer:
            lay.gpu_unrecorded_calls = by_layer[lay.layer]
    recorded = {r["id"]: r["recorded"] for r in rows}
    for sample in report.get("call_samples") or []:
        if sample["id"] in recorded:  # the one-call timeline shows what was recorded of this call
            sample["gpu_recorded"] = recorded[sample["id"]]
    for st in report["steps"]:
        if per_step.get(st["step"]):
            st["unrecorded_launches"] = per_step[st["step"]]
    cut = lost.tail > 0
    part["gpu_window"] = window = {
        "cut": cut,
        "unrecorded_launches": len(lost.launches),
        "after_last_recorded": lost.tail,
        "first_unrecorded_ts_us": round(lost.first_ts, 3),
        "gpu_end_ts_us": round(lost.gpu_end, 3) if lost.gpu_end is not None else None,
        "calls_not_recorded": len(none),
        "calls_partly_recorded": len(rows) - len(none),
        "launches_outside_calls": outside,
        "calls": rows[:MAX_CALL_ROWS],
    }
    report["warnings"].append(message(window))
    return part


def message(w: dict[str, Any]) -> str:
    """One line: what was not recorded, why, and which calls lost kernels."""
    n = w["unrecorded_launches"]
    why = ("the GPU window was cut: the profiler stopped before the GPU finished (no torch.cuda.synchronize() "
           "before the profile ended)" if w["cut"] else
           "kernels are missing inside the GPU window (activity records lost)")
    text = f"{why}: {n} kernel launch{'es' if n != 1 else ''} have no kernel in the trace"
    if w["calls"]:
        layers = Counter(r["layer"] for r in w["calls"])
        named = ", ".join(f"{lay} ({k} call{'s' if k > 1 else ''})" for lay, k in layers.most_common(5))
        more = f" and {len(layers) - 5} more layers" if len(layers) > 5 else ""
        text += (f"; attention calls not recorded on the GPU: {w['calls_not_recorded']}, partly recorded: "
                 f"{w['calls_partly_recorded']} ({named}{more}): their GPU time is not known, not 0")
    return text + "; GPU totals are what was recorded"


def _before(warnings: list[str], L: Linked) -> dict[str, Any] | None:
    """``before_window`` and its warning: GPU activities launched before the window (kineto flushed
    them from before the window, trace/window.py); they are in no call of the window."""
    b = L.before_window
    if b is None:
        return None
    if b.unknown:
        warnings.append(b.unknown)
        return None
    n = b.count
    warnings.append(
        f"{n} GPU activit{'ies' if n != 1 else 'y'} ({b.gpu_us:.1f} µs) were launched before the profiling window "
        f"(no launch in the trace, correlation ids older than every launch of the window; the first started at "
        f"{b.first_ts:.3f} µs): kineto flushed {'them' if n != 1 else 'it'} from before the window (warm-up or an "
        "earlier window); listed apart in before_window, in no attention call of the window")
    return {"gpu_activities": b.count, "gpu_us": round(b.gpu_us, 3),
            "first_ts_us": round(b.first_ts, 3), "window_start_ts_us": round(b.window_start, 3)}
