"""Each serving phase's attention figures: its time per stage and one roofline point, a decode judged
on the KV cache it reads (roofline/model.py's kv_cache_read), the other phases on the stage model."""

from __future__ import annotations

from typing import Any

from ..roofline import model
from ..roofline.devices import precision_of
from ..roofline.roof import point

CONVENTION = ("decode: bytes = the KV cache read, 2 (K and V) · batch · kv_heads · k_len · head_dim · itemsize "
              "per call, FLOPs the fused forward 4 · batch · q_heads · q_len · k_len · head_dim; other phases: "
              "roofline/model.py's stages (FLOPs and bytes per modelled stage); time: the modelled calls' "
              "attention time on the report's time basis")


def figures(calls, m, phase_of: dict[int, tuple[str, list[str]]], roofline: dict[str, Any] | None
            ) -> dict[str, dict[str, Any]]:
    """phase -> {"stages": [...], "roofline": {...} | None} for the phases seen."""
    basis = (roofline or {}).get("time_basis", "gpu")
    the_roof = (roofline or {}).get("roof")
    acc: dict[str, dict[str, Any]] = {}
    for c in calls:
        ph = phase_of[c.id][0]
        a = acc.setdefault(ph, {"stages": {}, "flops": 0.0, "bytes": 0.0, "time": 0.0, "units": 0, "modelled": 0,
                                "precisions": set()})
        cells = m.cells[c.id]
        for (stage, ps), cell in cells.items():
            row = a["stages"].setdefault((stage, ps), [0.0, 0.0])
            row[0] += cell.gpu_us
            row[1] += cell.cpu_us
        cost = _cost(c, cells, ph)
        if cost is None:
            continue
        flops, nbytes, time_us, units = cost
        a["flops"] += flops
        a["bytes"] += nbytes
        a["time"] += time_us if basis == "gpu" else units[1]
        a["units"] += units[0] if basis == "gpu" else units[2]
        a["modelled"] += 1
        a["precisions"].add(precision_of(c.info.get("dtype")))
    out: dict[str, dict[str, Any]] = {}
    for ph, a in acc.items():
        stages = [{"stage": st, "pass": ps, "gpu_us": round(g, 3), "cpu_us": round(cu, 3)}
                  for (st, ps), (g, cu) in sorted(a["stages"].items(), key=lambda kv: -kv[1][0] - kv[1][1])]
        roof_point = None
        if a["modelled"] and a["bytes"] > 0 and a["time"] > 0 and len(a["precisions"]) == 1:
            p = point(a["flops"], a["bytes"], a["time"], a["units"], the_roof, next(iter(a["precisions"])),
                      "kernels" if basis == "gpu" else "ops")
            roof_point = {"calls": a["modelled"], "flops": p["flops"], "bytes": p["bytes"], "time_us": p["time_us"],
                          "intensity": p["intensity"], "achieved_tflops": p["achieved_tflops"],
                          "achieved_tbs": p["achieved_tbs"], "bound": p["bound"], "bound_reason": p["bound_reason"],
                          "bytes_are": "kv_cache_read" if ph == "decode" else "stage_model"}
        out[ph] = {"stages": stages, "roofline": roof_point}
    return out


def _cost(c, cells, phase: str) -> tuple[float, float, float, tuple[int, float, int]] | None:
    """(FLOPs, bytes, GPU µs, (kernels, CPU µs, ops)) of one call's modelled stages; None without a shape."""
    z = model.sizes(c.info.get("shape"), c.info.get("dtype"))
    if z is None:
        return None
    if phase == "decode":
        gpu = sum(x.gpu_us for x in cells.values())
        cpu = sum(x.cpu_us for x in cells.values())
        units = (sum(x.kernels for x in cells.values()), cpu, sum(x.ops for x in cells.values()))
        return model.fused_forward_flops(z), model.kv_cache_read(z), gpu, units
    flops = nbytes = gpu = cpu = 0.0
    kernels = ops = 0
    causal = bool(c.info.get("causal"))
    for (stage, ps), cell in cells.items():
        cost = model.stage_cost(z, stage, ps, max(1, cell.kernels or cell.ops), causal)
        if cost is None:
            continue
        flops += cost[0]
        nbytes += cost[1]
        gpu += cell.gpu_us
        cpu += cell.cpu_us
        kernels += cell.kernels
        ops += cell.ops
    return (flops, nbytes, gpu, (kernels, cpu, ops)) if nbytes > 0 else None
