"""The roofline and the speed-up decomposition as terminal lines (report/text.py calls these)."""

from __future__ import annotations

from typing import Any

from .decompose import LABELS, PARTS


def roofline_lines(r: dict[str, Any], top: int = 6) -> list[str]:
    rf = r.get("roofline") or {}
    rows = rf.get("layers") or []
    if not rows:
        return []
    roof = rf.get("roof")
    if roof:
        tf = ", ".join(f"{k} {v:g}" for k, v in (roof.get("tflops") or {}).items() if v)
        bw = roof.get("bandwidth_tbs")
        head = (f"  roofline ({roof['kind']}: {roof.get('source') or roof.get('device')}): "
                f"{bw:g} TB/s, TFLOP/s {tf or 'unknown'}" if bw else
                f"  roofline ({roof['kind']}): no bandwidth known")
    else:
        head = "  roofline: no peak or bandwidth known for this device (the collector measures them on the CPU)"
    return [head] + [f"  - {row['line']}" for row in rows[:top]]


def decomposition_lines(c: dict[str, Any]) -> list[str]:
    d = c.get("decomposition")
    if not d:
        return []
    out = [f"  {d['sentence']}"]
    width = max(len(LABELS[p]) for p in PARTS)
    for p in PARTS:
        v = d["parts_us"][p]
        out.append(f"    {LABELS[p].ljust(width)}  {v / 1e3:+11.3f} ms")
    out.append(f"    {'measured difference'.ljust(width)}  {d['measured_us'] / 1e3:+11.3f} ms")
    return out
