"""Each serving phase's attention figures: its time per stage and one roofline point, a decode judged
on the KV cache it reads (roofline/model.py's kv_cache_read), the other phases on the stage model."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from ..attention.shapes import DTYPES
from ..roofline import model
from ..roofline.devices import precision_of
from ..roofline.roof import point
from . import phase_rules as R
from .phases import as_int

CONVENTION = ("decode: bytes = the KV cache read, 2 (K and V) · batch · kv_heads · k_len · head_dim · itemsize "
              "per call, FLOPs the fused forward 4 · batch · q_heads · q_len · k_len · head_dim; other phases: "
              "roofline/model.py's stages (FLOPs and bytes per modelled stage); time: the modelled calls' "
              "attention time on the report's time basis")
# said after CONVENTION only in a report with such a point (the others keep their words)
PAGED_CONVENTION = ("; a paged decode op (vLLM paged_attention) records its longest sequence only, so its bytes, "
                    "FLOPs and rates are at most these with k_len = max_seq_len for every sequence "
                    "(kv_cache_read_at_most; its FLOP per byte, 2 · q_heads / kv_heads / itemsize, does not depend "
                    "on the lengths)")
ITEMSIZE_OF_TYPE = {t: v[1] for t, v in DTYPES.items()} | {"unsigned char": 1}  # vLLM keeps an fp8 cache as uint8


def figures(L, calls, m, phase_of: dict[int, tuple[str, list[str]]], roofline: dict[str, Any] | None
            ) -> dict[str, dict[str, Any]]:
    """phase -> {"stages": [...], "roofline": {...} | None} for the phases seen."""
    basis = (roofline or {}).get("time_basis", "gpu")
    the_roof = (roofline or {}).get("roof")
    paged = L.where_name(R.is_paged_op) if len(L.names) else []
    acc: dict[str, dict[str, Any]] = {}
    for c in calls:
        ph = phase_of[c.id][0]
        a = acc.setdefault(ph, {"stages": {}, "flops": 0.0, "bytes": 0.0, "time": 0.0, "units": 0, "modelled": 0,
                                "precisions": set(), "at_most": False})
        cells = m.cells[c.id]
        for (stage, ps), cell in cells.items():
            row = a["stages"].setdefault((stage, ps), [0.0, 0.0])
            row[0] += cell.gpu_us
            row[1] += cell.cpu_us
        cost = _cost(c, cells, ph)
        dtype = c.info.get("dtype")
        if cost is None and ph == "decode" and paged:
            got = _paged_cost(L, c, cells, paged)
            if got is not None:
                cost, dtype, at_most = got
                a["at_most"] |= at_most
        if cost is None:
            continue
        flops, nbytes, time_us, units = cost
        a["flops"] += flops
        a["bytes"] += nbytes
        a["time"] += time_us if basis == "gpu" else units[1]
        a["units"] += units[0] if basis == "gpu" else units[2]
        a["modelled"] += 1
        a["precisions"].add(precision_of(dtype))
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
                          "bytes_are": "stage_model" if ph != "decode" else
                          "kv_cache_read_at_most" if a["at_most"] else "kv_cache_read"}
        out[ph] = {"stages": stages, "roofline": roof_point}
    return out


def _paged_cost(L, c, cells, paged: list[int]) -> tuple[tuple[float, float, float, tuple[int, float, int]], str | None,
                                                       bool] | None:
    """(the _cost of a paged decode call, its query's dtype, whether its bytes are a bound) from its
    paged op's recorded inputs (phase_rules.PAGED_ARGS): every sequence taken at the longest's length,
    exact only for one sequence. None where the op recorded no sizes it can read."""
    k = bisect_left(paged, c.lo)
    if k >= len(paged) or paged[k] >= c.hi:
        return None
    i = paged[k]
    row, a = R.paged_args_for(L.names[i]), L.args(i)
    if row is None or a is None or not isinstance(a.dims, list) or not isinstance(a.types, list):
        return None
    dims, types, conc = a.dims, a.types, a.concrete if isinstance(a.concrete, list) else []
    if len(dims) <= max(row.query, row.value_cache) or len(types) <= row.value_cache or len(conc) <= row.max_seq_len:
        return None
    q, vc, longest = dims[row.query], dims[row.value_cache], as_int(conc[row.max_seq_len])
    if not (isinstance(q, list) and len(q) == 3 and isinstance(vc, list) and len(vc) == 4
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < 1 << 40 for x in q + vc[1:3])
            and longest and 0 < longest < 1 << 40):
        return None
    n, hq, d = q
    hkv, dv = vc[1], vc[2]
    s = ITEMSIZE_OF_TYPE.get(types[row.value_cache]) if isinstance(types[row.value_cache], str) else None
    if dv != d or hq % hkv or not s:
        return None
    gpu = sum(x.gpu_us for x in cells.values())
    cpu = sum(x.cpu_us for x in cells.values())
    units = (sum(x.kernels for x in cells.values()), cpu, sum(x.ops for x in cells.values()))
    qt = types[row.query] if len(types) > row.query and isinstance(types[row.query], str) else None
    dtype = DTYPES[qt][0] if qt in DTYPES else None
    return (4.0 * n * hq * longest * d, 2.0 * n * hkv * longest * d * s, gpu, units), dtype, n > 1


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
