"""Step-level deltas between runs (last minus first), beside compare.py's attention deltas: the GPU span,
busy, each part of the step, idle, exposed communication; and each run's limit sentence."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

FIGURES = ("gpu_span_us", "busy_us", "communication_us")  # then the parts (idle, memcpy... among them)


def compare(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """{"rows": [{figure, values, delta_us, delta_pct}], "limits": {run: sentence}}; None when no run has
    an overview total (reports written before it)."""
    totals = [((r.get("overview") or {}).get("total") or None) for _, r in runs]
    if not any(totals):
        return None
    names = list(FIGURES)
    for t in totals:  # the parts in precedence order, as the first report that has them lists them
        for p in (t or {}).get("parts") or []:
            if p["part"] not in names:
                names.append(p["part"])
    rows = []
    for name in names:
        values = [_value(t, name) for t in totals]
        if all(v is None or v == 0 for v in values):
            continue
        first, last = values[0], values[-1]
        delta = round(last - first, 3) if first is not None and last is not None else None
        pct = round(100.0 * (last - first) / first, 1) if delta is not None and first else None
        rows.append({"figure": name, "values": values, "delta_us": delta, "delta_pct": pct})
    limits = {n: ((r.get("overview") or {}).get("limit") or {}).get("sentence") for n, r in runs}
    return {"rows": rows, "limits": limits}


def _value(total: Mapping[str, Any] | None, name: str) -> float | None:
    if not total or total.get("gpu_span_us") is None:  # no GPU activity: every figure unknown, never 0
        return None
    if name in total:
        return total[name]
    return next((p["us"] for p in total.get("parts") or [] if p["part"] == name), 0.0)
