"""The report's ``overview``: the steps' breakdown (steps.py), their sum and spread, what limits the
step (limit.py), and the calls' serving phases (phases.py)."""

from __future__ import annotations

from typing import Any

from . import limit as limits
from . import phase_figures, phases
from .steps import PRECEDENCE, breakdown

SUMMED = ("gpu_span_us", "busy_us", "idle_us", "idle_host_us", "idle_sync_us", "idle_kernel_us",
          "communication_us",
          "communication_exposed_us", "communication_hidden_us", "memcpy_us", "memset_us", "host_us",
          "data_loading_us", "optimizer_us")
SPREAD = ("gpu_span_us", "busy_us", "idle_us", "host_us", "data_loading_us", "optimizer_us")


def build(report: dict[str, Any], L, ev, calls, m, phase_of: dict[int, tuple[str, list[str]]] | None = None
          ) -> dict[str, Any]:
    """The report's ``overview`` (it reads the report's steps, gpu_window and roofline); marks each
    sampled call with its serving phase. ``phase_of``: phases.phase_of_calls's answer where the caller
    has it already."""
    lost: dict[int, int] = {}
    if report.get("gpu_window"):
        for st in report["steps"]:
            if st.get("unrecorded_launches"):
                lost[st["step"]] = st["unrecorded_launches"]
        outside = report["gpu_window"]["unrecorded_launches"] - sum(lost.values())
        if outside > 0:
            lost[-1] = outside
    rows = breakdown(L, ev, m, lost)
    total = _total(rows)
    if phase_of is None:
        phase_of = phases.phase_of_calls(L, calls, m)
    window = report.get("gpu_window") or {}
    overview: dict[str, Any] = {
        "precedence": list(PRECEDENCE) + ["idle"],
        "steps": rows,
        "total": total,
        "spread": _spread(rows),
        "limit": limits.limit(total, len(calls)),
        "window_cut": bool(window.get("cut")),
        "phases": phases.summary(calls, m, phase_of),
    }
    # figures per phase only where some call has a serving phase: with every call "unknown" they
    # would repeat the report's own stages and roofline under one more name
    served = any(ph != "unknown" for ph, _ in phase_of.values())
    per_phase = phase_figures.figures(L, calls, m, phase_of, report.get("roofline")) if served else {}
    for row in overview["phases"]:
        row.update(per_phase.get(row["phase"], {"stages": [], "roofline": None}))
    bounded = any((f.get("roofline") or {}).get("bytes_are") == "kv_cache_read_at_most" for f in per_phase.values())
    overview["phase_convention"] = phase_figures.CONVENTION + (phase_figures.PAGED_CONVENTION if bounded else "")
    for sample in report.get("call_samples") or []:
        got = phase_of.get(sample["id"])
        if got:
            sample["phase"] = got[0]
    return overview


def _total(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The steps added up (None without steps); a figure unknown in one step is unknown in the sum."""
    gpu = [r for r in rows if r["gpu_span_us"] is not None]
    if not rows:
        return None
    out: dict[str, Any] = {"step": None, "label": "all steps" if len(rows) > 1 else rows[0]["label"]}
    for k in SUMMED:
        vals = [r[k] for r in (gpu if k not in ("host_us", "data_loading_us", "optimizer_us") else rows)]
        out[k] = None if not vals or None in vals else round(sum(vals), 3)
    parts: dict[str, float] = {}
    for r in gpu:
        for p in r["parts"]:
            parts[p["part"]] = parts.get(p["part"], 0.0) + p["us"]
    span = out["gpu_span_us"]
    if "not_recorded" in parts:  # any step not recorded whole: the sum's gaps are not known to be idle
        parts["not_recorded"] += parts.pop("idle", 0.0)
        out["idle_us"] = out["idle_host_us"] = out["idle_sync_us"] = out["idle_kernel_us"] = None
    out["parts"] = [{"part": k, "us": round(v, 3), "share": round(v / span, 6) if span else None}
                    for k, v in parts.items()]
    dirs: dict[str, list] = {}
    for r in gpu:
        for d in r["memcpy_by_direction"]:
            got = dirs.setdefault(d["direction"], [0.0, 0])
            got[0] += d["us"]
            got[1] += d["count"]
    out["memcpy_by_direction"] = [{"direction": k, "us": round(v[0], 3), "count": v[1]} for k, v in dirs.items()]
    out["activities"] = sum(r["activities"] for r in rows)
    out["steps"] = len(rows)
    return out


def median(vals: list[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count); statistics.median's
    import costs a report more than all its uses."""
    v = sorted(vals)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) / 2


def _spread(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """min / median / max across steps of each figure, and of each part (known in every step)."""
    out = []
    for k in SPREAD:
        vals = [r[k] for r in rows if r.get(k) is not None]
        if vals and len(vals) == len(rows):
            out.append({"figure": k, "min_us": round(min(vals), 3), "median_us": round(median(vals), 3),
                        "max_us": round(max(vals), 3)})
    names = [p["part"] for p in rows[0]["parts"]] if rows and rows[0]["parts"] else []
    by_name = [{p["part"]: p["us"] for p in r["parts"]} for r in rows]
    for name in names:
        vals = [parts.get(name) for parts in by_name]
        if None not in vals:
            out.append({"figure": name, "min_us": round(min(vals), 3), "median_us": round(median(vals), 3),
                        "max_us": round(max(vals), 3)})
    return out
