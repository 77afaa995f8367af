"""The device a trace ran on, from kineto's ``deviceProperties``, and its peaks (table: device_table.py).

Identified by name first; when a trace leaves the name empty, by what it does give (vendor from
the warp size, compute capability / gfx target, SM or CU count, memory size). A trace with GPU
kernels is always described as a GPU, even when nothing identifies which.
"""

from __future__ import annotations

import re
from typing import Any

from ..format.linear_regex import compile_linear
from .device_table import DEVICES, GFX_COMPUTE, PRECISIONS, DeviceRow

GIB = 1 << 30
_COMPILED = [(compile_linear(row.pattern), row) for row in DEVICES]
_STATES_MEMORY = compile_linear(r"\d+\s*GB")  # "A100-SXM4-80GB"
# torch dtype name -> the precision whose peak bounds its matmuls (FP32 matmuls do not use TF32 by
# default in PyTorch: torch.backends.cuda.matmul.allow_tf32 is False).
PRECISION_OF_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp32",
                      "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8"}


def by_name(name: str, memory_bytes: int | None = None) -> DeviceRow | None:
    """The first row whose pattern the name matches; among rows that differ only in memory
    (A100 40 GB / 80 GB) the name decides, or the memory size when the name states none."""
    if not name:
        return None
    hits = [row for rx, row in _COMPILED if rx.search(name)]
    if not hits:
        return None
    first = hits[0]
    if memory_bytes and not _STATES_MEMORY.search(name):
        same = [r for r in DEVICES if _family(r) == _family(first) and r.units == first.units
                and r.tflops == first.tflops and r.by_facts]  # variants that differ only in memory
        if same:
            return min(same, key=lambda r: abs(r.memory_gb - memory_bytes / GIB))
    return first


def _family(row: DeviceRow) -> str:
    """The model word its pattern starts with: A100 for every A100 row."""
    m = re.match(r"\\b(\w+)", row.pattern)
    return m.group(1) if m else row.pattern


def by_facts(vendor: str, compute: str | None, units: int | None, memory_bytes: int | None) -> DeviceRow | None:
    """A row from what a name-less deviceProperties gives: vendor, compute capability, SM/CU count,
    memory (nearest). None unless the unit count matches some row exactly."""
    if not isinstance(units, int) or units <= 0:
        return None
    cands = []
    for row in DEVICES:
        if not row.by_facts or row.vendor != vendor or row.units != units:
            continue
        row_cc = row.arch if vendor == "NVIDIA" else GFX_COMPUTE.get(row.arch)
        if compute and row_cc and row_cc != compute:
            continue
        cands.append(row)
    if not cands:
        return None
    if memory_bytes:
        return min(cands, key=lambda r: abs(r.memory_gb - memory_bytes / GIB))
    return cands[0]


def peak_tflops(name: str, precision: str = "bf16") -> float | None:
    """Dense peak of the named device for a precision (default the 16-bit tensor peak), or None.
    Kept for callers that only have a name (``tb-attn sweep``'s "% of device peak")."""
    row = by_name(name)
    return row.tflops.get(precision) if row is not None else None


def precision_of(dtype: str | None) -> str:
    return PRECISION_OF_DTYPE.get(dtype or "", "bf16")


def peak_for(row_peaks: dict[str, float | None], precision: str) -> tuple[float | None, str]:
    """(TFLOP/s, precision used): a precision without a matrix path on the device falls back to the
    next wider one that has one (V100 bf16 -> fp16, MI210 tf32 -> fp32)."""
    order = {"fp8": ("fp8", "fp16", "bf16"), "bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"),
             "tf32": ("tf32", "fp32"), "fp32": ("fp32",)}
    for p in order.get(precision, (precision,)):
        v = row_peaks.get(p)
        if v:
            return float(v), p
    return None, precision


def describe(props: list[dict[str, Any]], has_gpu_kernels: bool = False) -> dict[str, Any] | None:
    """The report's ``device``: None for a CPU-only trace (no properties, no GPU kernels)."""
    if not props:
        if not has_gpu_kernels:
            return None
        return {"name": "unknown GPU", "vendor": None, "compute_capability": None, "memory_bytes": None,
                "sm_count": None, "count": 0, "peak_tflops": None, "identified_by": "none",
                "model": None, "peaks": None}
    p = props[0] if isinstance(props[0], dict) else {}
    raw_name = str(p.get("name") or "").strip()[:256]
    warp = p.get("warpSize")
    vendor = "AMD" if ("AMD" in raw_name or "Instinct" in raw_name or "Radeon" in raw_name or warp == 64) else "NVIDIA"
    major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
    cc = f"{major}.{minor or 0}" if major is not None else None
    gfx = str(p.get("gcnArchName") or "").split(":")[0][:32] or None
    mem = _int(p.get("totalGlobalMem"))
    units = _int(p.get("numSms"))
    row = by_name(raw_name, mem)
    how = "name" if row is not None else "none"
    if row is None and not raw_name:
        row = by_facts(vendor, GFX_COMPUTE.get(gfx, cc) if gfx else cc, units, mem)
        how = "facts" if row is not None else "none"
    if raw_name:
        name = raw_name
    elif row is not None:
        name = f"{row.name} (identified from {_facts_text(vendor, cc, gfx, units, mem)})"
    else:
        name = f"unknown {vendor} GPU ({_facts_text(vendor, cc, gfx, units, mem)})"
    return {
        "name": name,
        "vendor": vendor,
        "compute_capability": cc,
        "memory_bytes": mem,
        "sm_count": units,
        "count": len(props),
        "peak_tflops": row.tflops.get("bf16") or row.tflops.get("fp16") if row is not None else None,
        "identified_by": how,
        "model": row.name if row is not None else None,
        "peaks": _peaks(row) if row is not None else None,
    }


def _int(v: Any) -> int | None:
    """A non-negative int from untrusted JSON (not a bool, not a float, not a string)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _facts_text(vendor, cc, gfx, units, mem) -> str:
    parts = []
    if gfx:
        parts.append(gfx)
    elif cc:
        parts.append(f"compute {cc}")
    if units:
        parts.append(f"{units} {'CUs' if vendor == 'AMD' else 'SMs'}")
    if mem:
        parts.append(f"{mem / GIB:.0f} GiB")
    return ", ".join(parts) or "no properties"


def _peaks(row: DeviceRow) -> dict[str, Any]:
    return {"tflops": {k: row.tflops.get(k) for k in PRECISIONS}, "bandwidth_tbs": row.bandwidth_tbs,
            "source": row.source, "kind": "datasheet"}
