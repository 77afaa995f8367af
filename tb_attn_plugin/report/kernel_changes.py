"""Kernels matched across runs by fingerprint (reading/fingerprint.py): a kernel whose name changed but whose
library, pass, math-unit family and stage did not is the same work done another way, and the fields that
changed (tile, dtype, arch, knob, split, ...) say how."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..reading import fingerprint

CHANGEABLE = ("dtype", "math_unit", "tile", "layout", "arch", "knob", "split")
MAX_CHANGES = 50


def _by_key(r: Mapping[str, Any], others: set[str]) -> dict[tuple, dict[str, Any]]:
    """The kernels of one run that the other run lacks, by (stage, fingerprint key); the slowest wins."""
    out: dict[tuple, dict[str, Any]] = {}
    for k in r.get("kernels") or []:
        name = str(k.get("name"))
        if name in others:
            continue
        fp = fingerprint.decode(name)
        if fp.get("library") is None:
            continue  # an unknown kernel matches nothing: no guess
        key = (k.get("stage"), k.get("pass", "fwd")) + fingerprint.key(fp)
        gpu = k.get("gpu_us") if isinstance(k.get("gpu_us"), (int, float)) else 0.0
        if key not in out or gpu > out[key]["gpu_us"]:
            out[key] = {"name": name, "gpu_us": gpu, "fp": fp}
    return out


def changes(names: Sequence[str], reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """First run against last: each pair of differently named kernels with one fingerprint key, and what changed."""
    first, last = reports[0], reports[-1]
    a_names = {str(k.get("name")) for k in first.get("kernels") or []}
    b_names = {str(k.get("name")) for k in last.get("kernels") or []}
    a, b = _by_key(first, b_names), _by_key(last, a_names)
    rows = []
    for key in a.keys() & b.keys():
        x, y = a[key], b[key]
        diff = {f: [x["fp"].get(f), y["fp"].get(f)] for f in CHANGEABLE if x["fp"].get(f) != y["fp"].get(f)}
        if not diff:
            continue
        words = ", ".join(f"{f} {u or '?'} -> {v or '?'}" for f, (u, v) in diff.items())
        rows.append({"stage": key[0], "pass": key[1], "library": key[2], "runs": [names[0], names[-1]],
                     "kernels": [x["name"], y["name"]], "gpu_us": [round(x["gpu_us"], 3), round(y["gpu_us"], 3)],
                     "changed": diff, "message": f"{key[2]} {key[0]} kernel: {words}"})
    rows.sort(key=lambda r: -max(r["gpu_us"]))
    return rows[:MAX_CHANGES]
