"""The reading of one sampled call, as the tab's Reading panel shows it: looked up in the report, never recomputed."""

from __future__ import annotations

from typing import Any

from ..format.report.layers import Layer

MAX_KERNELS = 16  # distinct kernel names listed per call; the rest are counted
BACKWARD = ("not read: expected against actual counts the forward only, as the post does "
            "(reading/expectations.py has no backward rows)")
NO_HOST = "no host side recorded: these calls' kernels joined no CPU op (kernel-only calls, or a graph replay)"
NO_FINGERPRINT = "no fingerprint: the report decoded no kernel of this name (it is not in an attention layer's kernels)"
NO_OCCUPANCY = ("no launch configuration recorded: memcpy and memset have none, or the trace omits registers, "
                "shared memory and CUPTI's estimate for it")


def _get(d: Any, key: str) -> Any:
    return d.get(key) if isinstance(d, dict) else None


def _rows(v: Any) -> list[dict[str, Any]]:
    """A list of objects from a report section, whatever a damaged cache entry holds there."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _call_kernels(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The call's kernels by name, in the order they first ran: stage, pass, launches and µs in this call."""
    rows: dict[str, dict[str, Any]] = {}
    for e in sample.get("events") or []:
        if not isinstance(e, dict) or e.get("kind") != "kernel" or not isinstance(e.get("name"), str):
            continue
        row = rows.get(e["name"])
        if row is None:
            row = rows[e["name"]] = {"name": e["name"], "stage": e.get("stage"), "pass": e.get("pass"),
                                     "launches": 0, "us": 0.0}
        row["launches"] += 1
        dur = e.get("dur_us")
        row["us"] += dur if isinstance(dur, (int, float)) and not isinstance(dur, bool) else 0.0
    for row in rows.values():
        row["us"] = round(row["us"], 3)
    return list(rows.values())


def _kernels_unknown(report: dict[str, Any], sample: dict[str, Any]) -> str:
    if report.get("time_basis") == "cpu":
        return ("no GPU kernels: the trace recorded the CPU only, so there are no kernel names to decode and no "
                "occupancy; above, the ops that do work stand for kernels")
    if sample.get("truncated"):
        return "no GPU kernel among this call's first recorded events (the sample was cut)"
    return "no GPU kernel joined this call (none recorded in its window, or they ran in a graph replayed elsewhere)"


def panel(report: dict[str, Any], sample: dict[str, Any]) -> dict[str, Any]:
    """The Reading of ``sample``'s layer type × implementation (``report``: a decoded report or a view
    with its ``layers``, ``reading``, ``kernel_reading`` and ``time_basis``). Every piece the report
    cannot give is null, with the reason in ``unknown``."""
    unknown: dict[str, str] = {"backward": BACKWARD}
    layer_name = sample.get("layer")
    layers = report.get("layers")
    lay = next((x for x in layers if isinstance(x, Layer) and x.layer == layer_name), None) \
        if isinstance(layers, list) else None
    layer_type = lay.layer_type if lay is not None else None
    implementation = sample.get("implementation") or (lay.implementation if lay is not None else None)
    group = None
    if lay is None:
        unknown["layer"] = (f"layer {layer_name!r} is not among the report's layers (it keeps the slowest only: "
                            "report/layers.py MAX_LAYERS)")
    elif report.get("reading") is None:
        unknown["layer"] = "this report has no reading section"
    else:
        group = next((g for g in _rows(report["reading"]) if g.get("layer_type") == layer_type
                      and g.get("implementation") == implementation), None)
        if group is None:
            unknown["layer"] = (f"{layer_type} × {implementation} is not among the report's reading rows (it keeps those "
                                "with most calls: reading/section.py MAX_GROUPS)")
    expected = _get(group, "expected") if isinstance(_get(group, "expected"), dict) else None
    host = _get(group, "host") if isinstance(_get(group, "host"), dict) else None
    if group is not None:
        if expected is None:
            unknown["expected"] = "no forward op or kernel of these calls was read"
        elif expected.get("expected") is None:
            unknown["expected"] = f"no count expected: {expected.get('reason_unknown') or 'unknown implementation'}"
        if host is None:
            unknown["host"] = NO_HOST
        elif host.get("gpu_us_per_call") is None:
            unknown["gpu"] = "no GPU activity in this trace, so whether the call is host-bound is unknown"
        elif host.get("graph_replay"):
            unknown["gpu"] = "replayed from a graph: the host launched it once at capture, so no host cost per call"
    kr = report.get("kernel_reading") if isinstance(report.get("kernel_reading"), dict) else {}
    fps = kr.get("fingerprints") if isinstance(kr.get("fingerprints"), dict) else {}
    occ = {o.name: o for o in lay.occupancy} if lay is not None else {}
    kernels = _call_kernels(sample)
    for k in kernels:
        fp = fps.get(k["name"])
        k["fingerprint"] = fp
        k["fingerprint_unknown"] = None if fp is not None else NO_FINGERPRINT
        k["occupancy"] = occ.get(k["name"])
        k["occupancy_unknown"] = None if k["occupancy"] is not None else (
            kr["occupancy"] if str(kr.get("occupancy") or "").startswith("unknown") else NO_OCCUPANCY)
    if not kernels:
        unknown["kernels"] = _kernels_unknown(report, sample)
    if "kernel_reading" not in report or report.get("kernel_reading") is None:
        unknown["kernels"] = "this report has no kernel_reading section"
    # the same reading over the calls of this call's serving phase, where the report split it by phase
    phase = sample.get("phase")
    by_phase = next((p for p in _rows(_get(group, "phases")) if p.get("phase") == phase), None)
    wnf = lay.why_not_flash if lay is not None else None
    if wnf is None:
        unknown["why_not_flash"] = ((lay.why_not_flash_unknown if lay is not None else None)
                                    or ("layer unknown" if lay is None else "not read by the engine that wrote this report"))
    return {
        "call": sample.get("id"),
        "layer": layer_name,
        "layer_type": layer_type,
        "implementation": implementation,
        "calls": _get(group, "calls"),
        "phase": phase if isinstance(phase, str) else None,
        "phase_reading": by_phase,
        "phases": _rows(_get(group, "phases")) or None,
        "expected": expected,
        "host": host,
        "kernels": kernels[:MAX_KERNELS],
        "kernels_omitted": max(0, len(kernels) - MAX_KERNELS),
        "device_arch": kr.get("device_arch"),
        "occupancy_note": kr.get("occupancy"),
        "why_not_flash": wnf,
        "unknown": unknown,
    }
