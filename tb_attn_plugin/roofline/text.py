"""The roofline and the speed-up decomposition as terminal lines (report/text.py calls these)."""

from __future__ import annotations

from typing import Any

from ..text.units import bandwidth_text, flops_rate_text
from .decompose import LABELS, PARTS


def roofline_lines(r: dict[str, Any], top: int = 6) -> list[str]:
    rf = r.get("roofline") or {}
    rows = rf.get("layers") or []
    if not rows:
        return []
    roof = rf.get("roof")
    if roof:
        tf = ", ".join(f"{k} {flops_rate_text(v, 4)}" for k, v in (roof.get("tflops") or {}).items() if v)
        bw = roof.get("bandwidth_tbs")
        said = str(roof.get("source") or roof.get("device"))
        # "measured on vm (...)" already says its kind; a data-sheet source gets the word in front
        where = said if said.startswith(str(roof["kind"])) else f"{roof['kind']}: {said}"
        head = (f"  roofline ({where}): {bandwidth_text(bw)}, peaks {tf or 'unknown'}" if bw else
                f"  roofline ({where}): no bandwidth known, peaks {tf or 'unknown'}")
    else:
        head = "  roofline: no peak or bandwidth known for this device (the collector measures them on the CPU)"
    out = [head]
    if roof and roof.get("kind") == "measured":
        runs = f", best of {roof['runs']} runs" if roof.get("runs") else ""
        when = f"measured {roof['measured_at']}{runs}" if roof.get("measured_at") else "when measured: not recorded"
        given = f"; from {roof['override']} (--roof), not the trace's" if roof.get("override") else ""
        out.append(f"    roof {when}{given}; re-measure: {roof.get('remeasure')}")
        if roof.get("note"):
            out.append(f"    roof note: {roof['note']}")
    if rf.get("above_roof"):
        out.append(f"  warning: {rf['above_roof']}")
    return out + [f"  - {row['line']}" for row in rows[:top]]


def _ms(us: float) -> str:
    return f"{round(us / 1e3, 3) + 0.0:+11.3f}"  # + 0.0: no "-0.000"


def decomposition_lines(c: dict[str, Any]) -> list[str]:
    d = c.get("decomposition")
    if not d:
        return []
    out = [f"  {d['sentence']}"]
    width = max(len(LABELS[p]) for p in PARTS)
    for p in PARTS:
        v = d["parts_us"][p]
        out.append(f"    {LABELS[p].ljust(width)}  {_ms(v)} ms")
    out.append(f"    {'measured difference'.ljust(width)}  {_ms(d['measured_us'])} ms")
    return out
