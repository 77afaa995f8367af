"""The report's ``roofline`` section: one point per layer type, implementation and length class (and per
stage), the roof used, and each run's time split for comparisons (decompose.py).

Calls of one layer type whose lengths differ by more than a factor of two (OWLv2's vision and text
encoders share ``Owlv2Attention``: 5185 and 5 tokens) sit in different regimes of the roofline, so
they are separate points: lengths are classed by powers of two (Lq and Lk), which keeps a decode
loop whose Lk grows by one per step to a few points."""

from __future__ import annotations

from typing import Any

from ..text.units import bandwidth_text, flops_rate_pair_text, flops_rate_text, percent_text
from .devices import precision_of
from ..attention.metrics import Measured

from ..trace.link import Linked
from . import model, roof
from .timing import measure_timing

MAX_GROUPS = 200
PLAUSIBLE = 0.25
CONVENTION = {
    "flops": "matmuls 2·E·D each (E = B·H·Lq·Lk); fused forward 4·E·D, halved when causal; fused backward 2.5× "
             "forward; elementwise 1 FLOP per score element per pass (softmax 5, its backward 4)",
    "bytes": "eager/math: QKᵀ reads Q, K and writes E; each scale/mask/softmax/dropout kernel reads and writes E; AV "
             "reads E, V and writes O (backward likewise, softmax backward reads E twice). fused: reads Q, K, V, "
             "writes O and the log-sum-exp; fused backward (FlashAttention-2, recomputing QKᵀ) reads Q, K, V, O, dO "
             "and writes dQ, dK, dV. Projections, copies and other stages are not modelled. An elementwise stage "
             "whose fastest call of its shape took under a quarter of moving E at the roof's bandwidth worked on Q or K "
             "and is not modelled, for every call of that shape alike.",
    "attainable": "min(peak for the call's dtype, intensity × memory bandwidth)",
    "bound": f"launch when kernels (CPU: ops) average under {roof.LAUNCH_US:.0f} µs, or under {roof.SHORT_US:.0f} µs "
             f"reaching less than {roof.LOW_FRACTION:.0%} of attainable; else memory below the ridge point "
             "(peak / bandwidth), compute above",
    "decomposition": "per run: wall = busy kernel time + gaps between a call's kernels (CPU: root op time); "
                     "each modelled stage of each call counts in the part of its bound: memory (memory_floor_us is "
                     "the modelled bytes at the roof's bandwidth), launch, else compute; launch also takes gaps × "
                     "the run's median gap (CPU: the other ops × the median view-op self time); cpu = the remaining gaps (CPU: time outside ops); rest = stages not "
                     "modelled (on the CPU, compute = modelled − memory − launch); the parts sum to wall",
}


def build(L: Linked, calls, call_of: list[int], m: Measured, device: dict[str, Any] | None,
          metadata: dict[str, Any] | None, has_gpu: bool) -> dict[str, Any]:
    the_roof = roof.choose(device, metadata, has_gpu)
    t = measure_timing(L, calls, call_of, m)
    bw = the_roof.get("bandwidth_tbs") if the_roof else None
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    run = {b: {"busy": 0.0, "modelled": 0.0, "memory_bound": 0.0, "launch_bound": 0.0, "launch_units": 0,
               "bytes": 0.0, "flops": 0.0, "units": 0} for b in ("gpu", "cpu")}
    gpu_run, cpu_run = run["gpu"], run["cpu"]
    gpu_roof, cpu_roof = (the_roof, None) if has_gpu else (None, the_roof)
    bounds: dict[tuple, str | None] = {}  # roof.bound per distinct input: calls of a layer repeat them
    costs: dict[tuple, tuple[float, float] | None] = {}  # model.stage_cost per distinct input, likewise
    busy = [0.0, 0.0]  # (gpu, cpu): every cell's time, summed in the loop's order
    units = [0, 0]
    sizes = [model.sizes(c.info.get("shape"), c.info.get("dtype")) for c in calls]
    fastest = _fastest_elementwise(calls, sizes, m, has_gpu)
    for c, z in zip(calls, sizes):
        info = c.info
        prec = precision_of(info.get("dtype"))
        key = (c.layer_type, c.implementation, _length_class(info.get("shape")) if z is not None else None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"layer_type": c.layer_type, "implementation": c.implementation, "calls": 0,
                               "dtype": info.get("dtype"), "shape": info.get("shape"), "score_bytes": None,
                               "stages": {}, "modelled_calls": 0, "implausible": set(), "lengths": None}
        g["calls"] += 1
        cells = m.cells[c.id]
        if z is not None:
            g["modelled_calls"] += 1
            sh = info["shape"]
            lens = g["lengths"]
            if lens is None:
                g["lengths"] = {"q_len": [sh["q_len"], sh["q_len"]], "k_len": [sh["k_len"], sh["k_len"]]}
            else:
                for k in ("q_len", "k_len"):
                    lens[k] = [min(lens[k][0], sh[k]), max(lens[k][1], sh[k])]
            if not any(st == "fused" for st, _ in cells):
                g["score_bytes"] = max(g["score_bytes"] or 0, int(z.e * z.itemsize))
        causal = bool(info.get("causal"))
        stages = g["stages"]
        for (stage, ps), cell in cells.items():
            gpu_us, cpu_us, kernels, ops = cell.gpu_us, cell.cpu_us, cell.kernels, cell.ops
            busy[0] += gpu_us
            units[0] += kernels
            busy[1] += cpu_us
            units[1] += ops
            cost = _cost(costs, z, stage, ps, cell, has_gpu, causal, bw, fastest) if z is not None else None
            if cost is None:
                if z is not None and stage in model.ELEMENTWISE and (kernels if has_gpu else ops):
                    g["implausible"].add(stage)
                continue
            for r, tm, n, basis_roof in ((gpu_run, gpu_us, kernels, gpu_roof), (cpu_run, cpu_us, ops, cpu_roof)):
                r["modelled"] += tm
                r["flops"] += cost[0]
                r["bytes"] += cost[1]
                # Each call's stage counts in the part of its own bound (the roof of the device
                # whose time this basis is: none for the CPU time of a GPU run).
                bound = _bound(bounds, cost, tm, n, basis_roof, prec) if tm > 0 else None
                if bound == "memory":
                    r["memory_bound"] += tm
                elif bound == "launch":
                    r["launch_bound"] += tm
                    r["launch_units"] += n
            acc = stages.get((stage, ps))
            if acc is None:
                acc = stages[(stage, ps)] = [0.0, 0.0, 0.0, 0]
            acc[0] += cost[0]
            acc[1] += cost[1]
            acc[2] += gpu_us if has_gpu else cpu_us
            acc[3] += kernels if has_gpu else ops
    gpu_run["busy"], cpu_run["busy"] = busy
    gpu_run["units"], cpu_run["units"] = units
    classes: dict[tuple[str, str], int] = {}
    for lt, impl, _ in groups:
        classes[(lt, impl)] = classes.get((lt, impl), 0) + 1
    unit = "kernels" if has_gpu else "ops"
    rows = [_group_row(g, the_roof, classes[(g["layer_type"], g["implementation"])] > 1, unit) for g in groups.values()]
    rows = [r for r in rows if r is not None]
    rows.sort(key=lambda r: -r["time_us"])
    out = {
        "roof": the_roof,
        "time_basis": "gpu" if has_gpu else "cpu",
        "convention": CONVENTION,
        "layers": rows[:MAX_GROUPS],
        "layers_omitted": max(0, len(rows) - MAX_GROUPS),
        "timing": {"gpu": _timing("gpu", run["gpu"], t, the_roof if has_gpu else None) if has_gpu else None,
                   "cpu": _timing("cpu", run["cpu"], t, None if has_gpu else the_roof)},
    }
    above = [r for r in rows if r.get("above_roof") or any(p.get("above_roof") for p in r["stages"])]
    if above:
        out["above_roof"] = above_roof_sentence(the_roof, len(above))
    return out


def above_roof_sentence(the_roof: dict[str, Any], n: int) -> str:
    """What a rate above the roof means: for a measured roof, that it was measured low (a loaded machine);
    for a data-sheet one, that the model's bytes overcount what reached memory (caches) or the device is
    another."""
    who = f"{n} point{'s' if n > 1 else ''} above the {the_roof['kind']} roof"
    if the_roof["kind"] == "measured":
        when = f" (measured {the_roof['measured_at']})" if the_roof.get("measured_at") else " (when measured: not recorded)"
        return (f"{who}{when}: the roof is too low, likely measured under load; re-measure with "
                f"{the_roof.get('remeasure') or roof.remeasure_command(None)} and pass the file with --roof "
                f"(or {roof.OVERRIDE_ENV})")
    return (f"{who}: more than the data sheet allows, so the modelled bytes or FLOPs overcount what reached "
            f"memory (cache hits) or the device is not the one identified")


def _bound(memo: dict, cost: tuple[float, float], tm: float, units: int, the_roof, prec: str) -> str | None:
    """roof.bound of one stage of one call, computed once per distinct input (``the_roof`` is the
    build's roof or None, so whether it is None tells the two apart)."""
    key = (cost[0], cost[1], tm, units, the_roof is None, prec)
    got = memo.get(key, memo)
    if got is memo:
        got = memo[key] = roof.bound(cost[0], cost[1], tm, units, the_roof, prec)
    return got


def _fastest_elementwise(calls, sizes: list, m: Measured, has_gpu: bool) -> dict[tuple, float]:
    """The fastest time of each elementwise (shape, stage, pass) over the run's calls: whether such a
    stage moved the score matrix is decided once for all its calls, so calls with identical ops
    count identical bytes (a per-call decision flipped with each call's noise)."""
    out: dict[tuple, float] = {}
    for c, z in zip(calls, sizes):
        if z is None:
            continue
        for (stage, ps), cell in m.cells[c.id].items():
            if stage in model.ELEMENTWISE:
                spent = cell.gpu_us if has_gpu else cell.cpu_us
                k = (z, stage, ps)
                if spent > 0 and spent < out.get(k, float("inf")):
                    out[k] = spent
    return out


def _cost(memo: dict, z, stage: str, ps: str, cell, has_gpu: bool, causal: bool, bw: float | None,
          fastest: dict[tuple, float]):
    """(FLOP, bytes) of one stage of one call, or None: no model, no kernel ran (GPU) or no op (CPU),
    or an elementwise stage whose fastest call over the run (``fastest``) is far faster than moving the
    score matrix at the device's bandwidth (under PLAUSIBLE of that time: its kernels worked on Q or
    K, e.g. the scale applied before QKᵀ). The model's answer is computed once per distinct input (``memo``)."""
    if stage not in model.MODELLED_STAGES:
        return None
    passes = cell.kernels if has_gpu else (1 if cell.ops else 0)
    if passes == 0:
        return None
    key = (z, stage, ps, passes, causal)
    cost = memo.get(key, memo)
    if cost is memo:
        cost = memo[key] = model.stage_cost(z, stage, ps, passes=passes, causal=causal)
    if cost is not None and stage in model.ELEMENTWISE and bw:
        if fastest.get((z, stage, ps), 0.0) < PLAUSIBLE * cost[1] / (bw * 1e12) * 1e6:
            return None
    return cost


def _length_class(shape: dict[str, Any]) -> tuple[int, int, int]:
    """(⌊log2 Lq⌋, ⌊log2 Lk⌋, D): calls in one class differ in length by less than 2x."""
    return (int(shape["q_len"]).bit_length(), int(shape["k_len"]).bit_length(), int(shape["head_dim"]))


def _lengths_text(lengths: dict[str, list[int]] | None) -> str | None:
    """'L 5185×5185', or 'Lq 1, Lk 1024–2047' when the class spans several lengths."""
    if not lengths:
        return None
    (q0, q1), (k0, k1) = lengths["q_len"], lengths["k_len"]
    if q0 == q1 and k0 == k1:
        return f"L {q0}×{k0}"
    q = f"{q0}" if q0 == q1 else f"{q0}–{q1}"
    k = f"{k0}" if k0 == k1 else f"{k0}–{k1}"
    return f"Lq {q}, Lk {k}"


def _group_row(g: dict[str, Any], the_roof, several: bool, unit: str) -> dict[str, Any] | None:
    """One point; ``several``: its layer type and implementation have other length classes, so its
    label names its lengths."""
    g["unmodelled_stages"] = sorted(g.pop("implausible"))
    g["lengths_text"] = _lengths_text(g["lengths"]) if several else None
    g["label"] = f"{g['layer_type']} ({g['implementation']}" + (f", {g['lengths_text']})" if g["lengths_text"] else ")")
    stages = g.pop("stages")
    if not stages:
        return None
    prec = precision_of(g.get("dtype"))
    pts = []
    for (stage, ps), (f, b, tm, units) in stages.items():
        p = roof.point(f, b, tm, units, the_roof, prec, unit)
        pts.append({"stage": stage, "pass": ps, **p})
    pts.sort(key=lambda p: -p["time_us"])
    f = sum(p["flops"] for p in pts)
    b = sum(p["bytes"] for p in pts)
    tm = sum(p["time_us"] for p in pts)
    units = sum(p["units"] for p in pts)
    row = {**g, **roof.point(f, b, tm, units, the_roof, prec, unit), "stages": pts}
    if any(p.get("above_roof") for p in pts):
        row["above_roof"] = True
    row["dominant_stage"] = pts[0]["stage"] if pts else None
    n = max(1, g["modelled_calls"])
    row["per_call"] = {"flops": f / n, "bytes": b / n, "time_us": round(tm / n, 3)}
    row["line"] = line(row)
    return row


def line(row: dict[str, Any]) -> str:
    """'Owlv2Attention (eager): memory-bound, 2.1 TB/s of 3.35 TB/s (63%); most time in softmax fwd'.
    The bound and the numbers are the row's own point (the one its table row and chip show), never
    one of its stages': one bound per point, decided once in roof.point."""
    who = row["label"]
    bound = row.get("bound")
    top = row["stages"][0] if row.get("stages") else None
    where = f"; most time in {top['stage']} {top['pass']}" if top else ""
    if row.get("above_roof"):  # never '800% of attainable': a rate above the roof says the roof is wrong
        over = [p for p in [row] + list(row.get("stages") or []) if (p.get("fraction") or 0) > 1
                or (p.get("bandwidth_fraction") or 0) > 1]
        p = over[0]
        what = "" if p is row else f" ({p['stage']} {p['pass']})"
        return (f"{who}: {flops_rate_text(p['achieved_tflops'])}, {bandwidth_text(p['achieved_tbs'])}{what}: "
                f"above the roof ({flops_rate_text(p.get('attainable_tflops'))} attainable, "
                f"{bandwidth_text(p.get('bandwidth_tbs'))}): the roof is wrong, not the kernel{where}")
    if bound == "memory" and row.get("bandwidth_tbs"):
        return (f"{who}: memory-bound, {bandwidth_text(row['achieved_tbs'])} of {bandwidth_text(row['bandwidth_tbs'])} "
                f"({percent_text(row['bandwidth_fraction'])}){where}")
    if bound == "compute" and row.get("attainable_tflops"):
        return (f"{who}: compute-bound, {flops_rate_pair_text(row['achieved_tflops'], row['attainable_tflops'])} "
                f"({percent_text(row['fraction'])}, {row['precision']} peak){where}")
    if bound == "launch":
        return f"{who}: launch-bound: {row['bound_reason']}{where}"
    return (f"{who}: {flops_rate_text(row['achieved_tflops'])}, {bandwidth_text(row['achieved_tbs'])}"
            f" ({row['bound_reason']}){where}")


def _timing(basis: str, r: dict[str, Any], t, the_roof) -> dict[str, Any]:
    """One run's attention time split into parts that compare.py subtracts run from run. Each
    modelled stage of each call counts in the part of its bound (memory, launch; compute otherwise);
    the gaps between a call's kernels are launch (gaps × the median gap) and CPU (the rest)."""
    busy = r["busy"]
    if basis == "gpu":
        idle = sum(t.idle_gpu_us)
        gaps = sum(t.gaps_gpu)
        per = t.launch_gap_us or 0.0
        gap_launch = min(idle, gaps * per)
        launch = r["launch_bound"] + gap_launch
        cpu = idle - gap_launch
        count, per_name = r["units"], "launch_gap_us"
    else:
        wall = max(sum(t.wall_cpu_us), busy)
        idle = wall - busy
        per = t.dispatch_us or 0.0
        count, gaps, per_name = r["units"], r["units"], "dispatch_us"
        # Ops outside launch-bound stages still pay their dispatch (the median view op's self time).
        other_ops = max(0, count - r["launch_units"])
        room = max(0.0, busy - r["launch_bound"] - r["memory_bound"])
        launch = r["launch_bound"] + min(room, other_ops * per)
        cpu = idle
    wall = busy + idle
    bw = the_roof.get("bandwidth_tbs") if the_roof else None
    memory = r["memory_bound"]
    rest = busy - r["modelled"]
    compute = wall - memory - launch - cpu - rest
    parts = {"memory": memory, "compute": compute, "launch": launch, "cpu": cpu, "rest": rest}
    return {"wall_us": round(wall, 3), "busy_us": round(busy, 3), "idle_us": round(idle, 3),
            "units": count, "gaps": gaps, per_name: round(per, 3), "modelled_us": round(r["modelled"], 3),
            "bytes": r["bytes"], "flops": r["flops"], "bandwidth_tbs": bw,
            "memory_floor_us": round(r["bytes"] / (bw * 1e12) * 1e6, 3) if bw else None,
            "parts_us": {k: round(v, 3) for k, v in parts.items()}}
