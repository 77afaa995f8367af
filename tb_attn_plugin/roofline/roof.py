"""The roof of a trace (peak FLOP/s and memory bandwidth: data-sheet or measured) and the bound of a point under it.

Attainable rate = min(peak, intensity × bandwidth) (Williams, Waterman, Patterson 2009). Bound:
``launch`` when the kernels (CPU: ops) of a point are too short to fill the device: an average
under LAUNCH_US, or under SHORT_US while reaching less than LOW_FRACTION of the attainable rate;
otherwise ``memory`` below the ridge point (peak / bandwidth) and ``compute`` above it.
"""

from __future__ import annotations

import math
from typing import Any

from ..format.units import per_second, sig
from .devices import peak_for

LAUNCH_US = 10.0
SHORT_US = 50.0
LOW_FRACTION = 0.05
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


def _pos(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return None


def choose(device: dict[str, Any] | None, metadata: dict[str, Any] | None, has_gpu: bool) -> dict[str, Any] | None:
    """Data-sheet peaks of an identified GPU, else the collector's measurement recorded in the trace
    (for the device type the trace ran on), else None."""
    if device and isinstance(device.get("peaks"), dict):
        p = device["peaks"]
        return {"kind": "datasheet", "device": device.get("model") or device.get("name"), "source": p.get("source"),
                "tflops": {k: _pos(p["tflops"].get(k)) for k in PRECISIONS}, "bandwidth_tbs": _pos(p.get("bandwidth_tbs"))}
    m = (metadata or {}).get("peaks")
    if not isinstance(m, dict) or m.get("kind") != "measured" or not isinstance(m.get("tflops"), dict):
        return None
    if (m.get("device_type") == "cuda") != has_gpu:
        return None  # measured on another kind of device than the one whose time is reported
    bw = _pos(m.get("bandwidth_tbs"))
    tf = {k: _pos(m["tflops"].get(k)) for k in PRECISIONS}
    if bw is None and not any(tf.values()):
        return None
    return {"kind": "measured", "device": str(m.get("device") or "")[:200], "source": str(m.get("source") or "")[:300],
            "method": str(m.get("method") or "")[:300], "tflops": tf, "bandwidth_tbs": bw}


def point(flops: float, nbytes: float, time_us: float, units: int, roof: dict[str, Any] | None,
          precision: str, unit: str = "kernels") -> dict[str, Any]:
    """Intensity, achieved and attainable rates, fraction and bound of one (FLOP, bytes, time) point.
    ``units`` counts ``unit``: "kernels" on a GPU, "ops" where the time is the CPU's."""
    out: dict[str, Any] = {"flops": flops, "bytes": nbytes, "time_us": round(time_us, 3), "units": units,
                           "intensity": _sig(flops / nbytes) if nbytes > 0 else None}
    out["achieved_tflops"] = sig(per_second(flops, time_us, 1e12))
    out["achieved_tbs"] = sig(per_second(nbytes, time_us, 1e12))
    peak, used = peak_for(roof["tflops"], precision) if roof else (None, precision)
    bw = roof.get("bandwidth_tbs") if roof else None
    out["precision"] = used
    out["peak_tflops"] = peak
    out["bandwidth_tbs"] = bw
    attainable = None
    if peak and bw and out["intensity"] is not None:
        attainable = min(peak, out["intensity"] * bw)
    elif peak and not bw:
        attainable = peak
    out["attainable_tflops"] = _sig(attainable) if attainable else None
    frac = out["achieved_tflops"] / attainable if attainable and out["achieved_tflops"] is not None else None
    out["fraction"] = _sig(frac) if frac is not None else None
    out["bandwidth_fraction"] = _sig(out["achieved_tbs"] / bw) if bw and out["achieved_tbs"] is not None else None
    mean = time_us / units if units > 0 else None
    out["mean_unit_us"] = round(mean, 3) if mean is not None else None
    out["bound"], out["bound_reason"] = _bound(out, peak, bw, mean, unit)
    return out


def bound(flops: float, nbytes: float, time_us: float, units: int, roof: dict[str, Any] | None,
          precision: str) -> str | None:
    """point(...)["bound"] alone: a mean under LAUNCH_US (most short stages) settles it without the
    rest of the point."""
    if _too_short(time_us / units if units > 0 else None):
        return "launch"
    return point(flops, nbytes, time_us, units, roof, precision)["bound"]


def _too_short(mean: float | None) -> bool:
    return mean is not None and mean < LAUNCH_US


def _bound(p: dict[str, Any], peak: float | None, bw: float | None, mean: float | None,
           unit: str = "kernels") -> tuple[str | None, str]:
    # A kernel too short leaves the GPU idle around it; a CPU op too short is mostly dispatch.
    why = "too short to fill the device" if unit == "kernels" else "too short to outweigh the dispatch overhead"
    if _too_short(mean):
        return "launch", f"{unit} average {mean:.1f} µs (< {LAUNCH_US:.0f} µs): {why}"
    if mean is not None and mean < SHORT_US and p["fraction"] is not None and p["fraction"] < LOW_FRACTION:
        return "launch", (f"{unit} average {mean:.1f} µs and reach {p['fraction']:.1%} of the attainable rate: {why}")
    if not peak or not bw or p["intensity"] is None:
        return None, "no roof: peak or bandwidth unknown for this device"
    ridge = peak / bw
    if p["intensity"] < ridge:
        return "memory", f"intensity {p['intensity']:.3g} FLOP/B is below the ridge point {ridge:.0f} FLOP/B"
    return "compute", f"intensity {p['intensity']:.3g} FLOP/B is above the ridge point {ridge:.0f} FLOP/B"


def _sig(v: float) -> float:
    return float(f"{v:.4g}")
