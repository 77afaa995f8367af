"""The device a trace ran on, from kineto's ``deviceProperties``, and its dense 16-bit peak.

Peaks are the vendors' published dense (no sparsity) BF16/FP16 tensor throughput, in TFLOP/s.
Names are matched by substring, most specific first.
"""

from __future__ import annotations

from typing import Any

PEAK_TFLOPS_16BIT: tuple[tuple[str, float], ...] = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # SXM / HBM3
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("V100", 125.0),
    ("T4", 65.0),
    ("RTX 4090", 165.0),
    ("MI300X", 1307.0),
    ("MI325X", 1307.0),
    ("MI250X", 383.0),
    ("MI250", 362.0),
)


def peak_tflops(name: str) -> float | None:
    for key, tf in PEAK_TFLOPS_16BIT:
        if key in name:
            return tf
    return None


def describe(props: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not props:
        return None
    p = props[0]
    name = str(p.get("name", "unknown GPU"))
    vendor = "AMD" if ("AMD" in name or "Instinct" in name or p.get("warpSize") == 64) else "NVIDIA"
    cc = None
    if "computeMajor" in p:
        cc = f"{p.get('computeMajor')}.{p.get('computeMinor', 0)}"
    return {
        "name": name,
        "vendor": vendor,
        "compute_capability": cc,
        "memory_bytes": p.get("totalGlobalMem"),
        "sm_count": p.get("numSms"),
        "count": len(props),
        "peak_tflops": peak_tflops(name),
    }
