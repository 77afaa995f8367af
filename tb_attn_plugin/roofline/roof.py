"""The roof of a trace (peak FLOP/s and memory bandwidth: data-sheet or measured) and the bound of a point under it.

Attainable rate = min(peak, intensity × bandwidth) (Williams, Waterman, Patterson 2009). Bound:
``launch`` when the kernels (CPU: ops) of a point are too short to fill the device: an average
under LAUNCH_US, or under SHORT_US while reaching less than LOW_FRACTION of the attainable rate;
otherwise ``memory`` below the ridge point (peak / bandwidth) and ``compute`` above it.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

from ..text.units import per_second, sig
from .devices import peak_for

LAUNCH_US = 10.0
SHORT_US = 50.0
LOW_FRACTION = 0.05
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
OVERRIDE_ENV = "TB_ATTN_ROOF"  # a roof file (python -m tb_attn_plugin.collector.peaks --out FILE) replacing the trace's
MAX_ROOF_FILE = 1 << 16


def remeasure_command(device_type: str | None) -> str:
    """The command that measures this machine's roof afresh and writes a file --roof / TB_ATTN_ROOF take."""
    dev = "cuda" if device_type == "cuda" else "cpu"
    return f"python -m tb_attn_plugin.collector.peaks --device {dev} --out roof-{dev}.json"


def _text(v: Any, n: int) -> str | None:
    return str(v)[:n] if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None


def load_override(path: str) -> dict[str, Any]:
    """The roof in ``path`` (a JSON object as the collector measures it: ``tflops`` per precision,
    ``bandwidth_tbs``, ``device_type``), checked like a trace: a regular file, at most 64 KiB.
    Raises ValueError with the cause in words."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValueError(f"cannot read the roof file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("the roof file is not a regular file")
    if st.st_size > MAX_ROOF_FILE:
        raise ValueError(f"the roof file is {st.st_size} bytes, over the {MAX_ROOF_FILE} a roof needs")
    try:
        with open(path, "rb") as f:
            got = json.loads(f.read(MAX_ROOF_FILE + 1))
    except (OSError, ValueError) as e:
        raise ValueError(f"the roof file is not JSON: {e}") from None
    tf = got.get("tflops") if isinstance(got, dict) else None
    if not isinstance(tf, dict) or not (_pos(got.get("bandwidth_tbs")) or any(_pos(tf.get(k)) for k in PRECISIONS)):
        raise ValueError("the roof file has no positive 'tflops' per precision or 'bandwidth_tbs'")
    if got.get("device_type") not in ("cpu", "cuda"):
        raise ValueError("the roof file's 'device_type' is neither 'cpu' nor 'cuda'")
    return got


def _override(has_gpu: bool) -> dict[str, Any] | None:
    path = os.environ.get(OVERRIDE_ENV)
    if not path:
        return None
    try:
        got = load_override(path)
    except ValueError:
        return None  # the CLI checks the file before any analysis and stops there; a worker keeps the trace's roof
    return got if (got["device_type"] == "cuda") == has_gpu else None


def _measured(m: dict[str, Any], override: str | None = None) -> dict[str, Any] | None:
    bw = _pos(m.get("bandwidth_tbs"))
    tf = {k: _pos(m["tflops"].get(k)) for k in PRECISIONS}
    if bw is None and not any(tf.values()):
        return None
    out = {"kind": "measured", "device": str(m.get("device") or "")[:200], "source": str(m.get("source") or "")[:300],
           "method": str(m.get("method") or "")[:300], "measured_at": _text(m.get("measured_at"), 40),
           "runs": m["runs"] if isinstance(m.get("runs"), int) and not isinstance(m.get("runs"), bool) else None,
           "remeasure": remeasure_command(m.get("device_type")), "tflops": tf, "bandwidth_tbs": bw}
    if _text(m.get("note"), 300):
        out["note"] = _text(m.get("note"), 300)
    if override:
        out["override"] = override[:300]
    return out


def _pos(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return None


def choose(device: dict[str, Any] | None, metadata: dict[str, Any] | None, has_gpu: bool) -> dict[str, Any] | None:
    """Data-sheet peaks of an identified GPU, else the collector's measurement recorded in the trace
    (for the device type the trace ran on), else None. A roof file named by TB_ATTN_ROOF (the CLI's
    --roof) for the trace's kind of device replaces any of them: old traces keep the roof measured
    when they were recorded."""
    o = _override(has_gpu)
    if o is not None:
        return _measured(o, os.environ.get(OVERRIDE_ENV))
    if device and isinstance(device.get("peaks"), dict):
        p = device["peaks"]
        return {"kind": "datasheet", "device": device.get("model") or device.get("name"), "source": p.get("source"),
                "tflops": {k: _pos(p["tflops"].get(k)) for k in PRECISIONS}, "bandwidth_tbs": _pos(p.get("bandwidth_tbs"))}
    m = (metadata or {}).get("peaks")
    if not isinstance(m, dict) or m.get("kind") != "measured" or not isinstance(m.get("tflops"), dict):
        return None
    if (m.get("device_type") == "cuda") != has_gpu:
        return None  # measured on another kind of device than the one whose time is reported
    return _measured(m)


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
    if (out["fraction"] or 0) > 1 or (out["bandwidth_fraction"] or 0) > 1:
        out["above_roof"] = True  # nothing runs faster than its roof: the roof (or the model's amounts) is wrong
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
