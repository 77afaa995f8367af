"""The /memory route's answer: a report's memory section with its curve downsampled again to the
number of points the view asks for (bounded), so a million-entry snapshot stays small on the wire."""

from __future__ import annotations

from typing import Any

import msgspec

from ..memory.engine import NO_MEMORY
from ..memory.timeline import downsample
from ..report.spans import is_empty

DEFAULT_POINTS = 1000
MIN_POINTS, MAX_POINTS = 50, 5000


class MemoryView(msgspec.Struct):
    memory: Any = None
    metadata: Any = None
    calls: Any = None
    steps: Any = None
    total_cpu_us: Any = None
    total_gpu_us: Any = None


def parse_points(n: int | None) -> int:
    """The 'points' parameter (already read as ASCII digits by the plugin's one integer helper);
    ValueError with the reason when it is out of range."""
    if n is None:
        return DEFAULT_POINTS
    if not MIN_POINTS <= n <= MAX_POINTS:
        raise ValueError(f"parameter 'points' must be from {MIN_POINTS} to {MAX_POINTS}, not {n}")
    return n


def payload(view: MemoryView, points: int, where: dict[str, Any]) -> dict[str, Any]:
    mem = view.memory
    meta = view.metadata if isinstance(view.metadata, dict) else {}
    out = {**where, "metadata": meta}
    if not isinstance(mem, dict):
        return {**out, "memory": None, "note": _why_none(view, meta)}
    out["memory"] = _thin(mem, points)
    if isinstance(mem.get("snapshot_section"), dict):
        out["memory"]["snapshot_section"] = _thin(mem["snapshot_section"], points)
    return out


def _why_none(view: MemoryView, meta: dict[str, Any]) -> str:
    """Why a span has no memory: how to record it only when it was not asked for."""
    empty = is_empty({"calls": view.calls, "steps": view.steps if isinstance(view.steps, list) else [],
                      "total_cpu_us": view.total_cpu_us, "total_gpu_us": view.total_gpu_us})
    if meta.get("memory") is True or empty:
        asked = "profiled with memory=True, but " if meta.get("memory") is True else ""
        what = "no step of this span took any time and it holds no attention call" if empty else \
            "no memory events fell into this span"
        return f"{asked}{what}: pick another span"
    return NO_MEMORY


def _thin(mem: dict[str, Any], points: int) -> dict[str, Any]:
    mem = dict(mem)
    curve = dict(mem.get("curve") or {})
    t, b = curve.get("t_us") or [], curve.get("bytes") or []
    if len(t) > points and len(t) == len(b):
        peak = max(range(len(b)), key=b.__getitem__)
        times, values, idx = downsample(t, b, points, keep=(peak,))
        reserved = curve.get("reserved")
        curve.update(t_us=times, bytes=values,
                     reserved=[reserved[i] for i in idx] if isinstance(reserved, list) and len(reserved) == len(t) else None)
    mem["curve"] = curve
    return mem
