"""Comparison of two or more reports: what changed in attention between runs.

Pure data in, data out (no torch, no TensorBoard) so that the plugin's /compare route and the CLI
give the same answer. Deltas are always "last run minus first run", rows are sorted by the size of
that change, and one time basis is used for every run so the numbers are comparable: GPU kernel
time when every run has GPU kernels, else CPU op time (and the result says which and why).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..format.tags import STAGES
from ..overview import compare as step_compare
from ..roofline.decompose import decompose
from . import kernel_changes, memory_compare, noise
from .layer_match import natural_key, layer_types, match_layers
from ..text.words import cut, duration

PASS_ORDER = ("fwd", "bwd")
MAX_ONLY_IN = 100  # kernels listed per run in kernels_only_in; the count is always exact


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def time_basis(reports: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """("gpu" | "cpu", the reason in words)."""
    no_gpu = [i for i, r in enumerate(reports) if r.get("time_basis") != "gpu" or _num(r.get("total_gpu_us")) <= 0]
    if not no_gpu:
        return "gpu", "GPU kernel time: every run has GPU kernels"
    return "cpu", "CPU op time: not every run has GPU kernels"


def _delta(values: list[float]) -> tuple[float, float | None]:
    first, last = values[0], values[-1]
    delta = round(last - first, 3)
    pct = round(100.0 * (last - first) / first, 1) if first else None
    return delta, pct


def _stage_key(stage: str, pas: str) -> tuple[int, int, str, str]:
    si = STAGES.index(stage) if stage in STAGES else len(STAGES)
    pi = PASS_ORDER.index(pas) if pas in PASS_ORDER else len(PASS_ORDER)
    return (pi, si, stage, pas)


def _by_change(row: dict[str, Any]) -> tuple[float, Any]:
    return (-abs(row["delta_us"]), row.get("_order", 0))


def _stages(reports: Sequence[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    per_run: list[dict[tuple[str, str], float]] = []
    for r in reports:
        acc: dict[tuple[str, str], float] = {}
        for s in r.get("stages") or []:
            k = (str(s.get("stage")), str(s.get("pass", "fwd")))
            acc[k] = acc.get(k, 0.0) + _num(s.get(key))
        per_run.append(acc)
    keys = sorted({k for acc in per_run for k in acc}, key=lambda k: _stage_key(*k))
    rows = []
    for order, (stage, pas) in enumerate(keys):
        values = [round(acc.get((stage, pas), 0.0), 3) for acc in per_run]
        if not any(values):
            continue
        delta, pct = _delta(values)
        rows.append({"stage": stage, "pass": pas, "values": values, "delta_us": delta, "delta_pct": pct, "_order": order})
    return _finish(rows)


def _layers(reports: Sequence[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    """One row per layer type, a layer's type being that of the layer it pairs with (layer_match):
    eager's motif, SDPA's tag and a compiled run's fused op of one module land in one row."""
    keys = match_layers(reports)
    types = layer_types(reports, keys)
    per_run: list[dict[str, tuple[float, set[str], list[str]]]] = []
    order: dict[str, int] = {}
    own: dict[str, list[str]] = {}  # row -> the layer types its layers have on their own runs' pages, in run order
    for r, k in zip(reports, keys):
        acc: dict[str, tuple[float, set[str], list[str]]] = {}
        for layer in r.get("layers") or []:
            name = layer.layer
            lt = types.get(k.get(name, ""), "") or layer.layer_type or name or "?"
            order.setdefault(lt, len(order))
            mine = layer.layer_type or name or "?"
            if mine not in own.setdefault(lt, []):
                own[lt].append(mine)
            total, impls, names = acc.get(lt, (0.0, set(), []))
            impl = layer.implementation
            acc[lt] = (total + getattr(layer, key), impls | ({impl} if impl else set()), names + [name])
        per_run.append(acc)
    rows = []
    for lt in order:
        values = [round(acc[lt][0], 3) if lt in acc else 0.0 for acc in per_run]
        # None where the run has no such layer; "a+b" where one layer type runs several ways.
        impl_text = ["+".join(sorted(acc[lt][1])) or None if lt in acc else None for acc in per_run]
        delta, pct = _delta(values)
        # one layer, one name in every view: a compiled run's "cpu_fused attention" is shown beside the
        # "Attention" it pairs with, as each run's own page names it
        label = " = ".join([lt] + [t for t in own.get(lt, []) if t != lt])
        rows.append({"layer_type": label, "values": values, "implementations": impl_text, "delta_us": delta,
                     "delta_pct": pct, "_order": order[lt],
                     # each run's layers in this row, by their own names ([] where the run has none)
                     "layers": [sorted(acc[lt][2], key=natural_key) if lt in acc else [] for acc in per_run]})
    return _finish(rows)


def _finish(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows.sort(key=_by_change)
    for row in rows:
        row.pop("_order", None)
    return rows


def _kernels_only_in(names: Sequence[str], reports: Sequence[Mapping[str, Any]]) -> tuple[dict, dict]:
    kernel_sets = [{str(k.get("name")) for k in r.get("kernels") or []} for r in reports]
    only: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    for i, (name, r) in enumerate(zip(names, reports)):
        others = set().union(*(s for j, s in enumerate(kernel_sets) if j != i))
        rows = [{"name": str(k.get("name")), "stage": k.get("stage"), "pass": k.get("pass", "fwd"),
                 "gpu_us": round(_num(k.get("gpu_us")), 3), "count": k.get("count")}
                for k in r.get("kernels") or [] if str(k.get("name")) not in others]
        rows.sort(key=lambda k: (-k["gpu_us"], k["name"]))
        counts[name] = len(rows)
        only[name] = rows[:MAX_ONLY_IN]
    return only, counts


def _ops_only_in(names: Sequence[str], reports: Sequence[Mapping[str, Any]]) -> tuple[dict, dict]:
    """The attention op names (report ``ops``) of each run that no other run has, slowest first (capped,
    counted): a CPU run launches no kernels, so its ops are what changed."""
    per_run: list[dict[str, dict[str, Any]]] = []
    for r in reports:
        acc: dict[str, dict[str, Any]] = {}
        for o in r.get("ops") or []:
            if not isinstance(o, Mapping):
                continue
            row = acc.setdefault(str(o.get("name")), {"name": str(o.get("name")), "stages": [], "cpu_us": 0.0, "count": 0})
            where = f"{o.get('stage')} {o.get('pass', 'fwd')}"
            if where not in row["stages"]:
                row["stages"].append(where)
            row["cpu_us"] = round(row["cpu_us"] + _num(o.get("cpu_us")), 3)
            row["count"] += int(_num(o.get("count")))
        per_run.append(acc)
    only: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    for i, (name, acc) in enumerate(zip(names, per_run)):
        others = set().union(*(set(a) for j, a in enumerate(per_run) if j != i))
        rows = sorted((row for n, row in acc.items() if n not in others), key=lambda o: (-o["cpu_us"], o["name"]))
        counts[name] = len(rows)
        only[name] = rows[:MAX_ONLY_IN]
    return only, counts


def _impl_names(r: Mapping[str, Any]) -> list[str]:
    return sorted({str(i.get("implementation")) for i in r.get("implementations") or [] if i.get("implementation")})


def _device_name(r: Mapping[str, Any]) -> str:
    got = r.get("device")
    dev: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    return str(dev.get("name") or ("unknown GPU" if r.get("time_basis") == "gpu" else "CPU"))


def _model_of(r: Mapping[str, Any]) -> str:
    """The model a run profiled, as far as the report says: the collector's ``metadata.model`` when
    present, else its attention layer types."""
    got = r.get("metadata")
    meta: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
    if isinstance(meta.get("model"), str) and meta["model"]:
        return meta["model"]
    return ", ".join(sorted({str(i.get("layer_type")) for i in r.get("implementations") or []
                             if isinstance(i, Mapping) and i.get("layer_type")})) or "no attention"


def differences(names: Sequence[str], reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """What differs between first and last run besides the change compared: other devices, other
    models (no attention layer in common), said before any percentage."""
    out = []
    d0, d1 = _device_name(reports[0]), _device_name(reports[-1])
    if d0 != d1:
        out.append(f"different devices: {names[0]} ran on {d0}, {names[-1]} on {d1}")
    keys = match_layers([reports[0], reports[-1]])
    if any(k for k in keys) and not set(keys[0].values()) & set(keys[1].values()):
        out.append(f"different models or inputs: no attention layer in common by name or shape ({names[0]}: {cut(_model_of(reports[0]), 80)}; "
                   f"{names[-1]}: {cut(_model_of(reports[-1]), 80)})")
    return out


def _summary(names: Sequence[str], reports: Sequence[Mapping[str, Any]], basis: str, stages: list[dict],
             said_first: list[str], verdict: dict[str, Any]) -> str:
    key = f"attention_{basis}_us"
    a0, a1 = _num(reports[0].get(key)), _num(reports[-1].get(key))
    change = f" ({100.0 * (a1 - a0) / a0:+.1f}%)" if a0 else ""
    head = "".join(f"{d}; " for d in said_first)
    line = (f"{head}{names[-1]} vs {names[0]}: {verdict['headline']}: attention {duration(a0)} -> {duration(a1)} "
            f"{basis.upper()} time{change}; {verdict['why']}")
    i0, i1 = _impl_names(reports[0]), _impl_names(reports[-1])
    if i0 != i1:
        line += f"; implementation {'+'.join(i0) or 'none'} -> {'+'.join(i1) or 'none'}"
    if stages and stages[0]["delta_us"]:
        s = stages[0]
        line += f"; largest stage change: {s['stage']} {s['pass']} {'+' if s['delta_us'] > 0 else '-'}{duration(abs(s['delta_us']))}"
    if basis == "gpu":  # a run whose calls lost kernels (report.gpu_window) compares a lower bound
        for name, r in zip(names, reports):
            lost = len((r.get("gpu_window") or {}).get("calls") or [])
            if lost:
                line += f"; {name}: GPU window cut, {lost} call{'s' if lost > 1 else ''} lost kernels (a lower bound)"
    return line


def compare_reports(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Compare ``[(run name, report), ...]`` (at least two). Deltas are last minus first."""
    if len(runs) < 2:
        raise ValueError("a comparison needs at least two runs")
    names = [n for n, _ in runs]
    reports = [r for _, r in runs]
    basis, why = time_basis(reports)
    key = f"{basis}_us"
    stages = _stages(reports, key)
    only, counts = _kernels_only_in(names, reports)
    ops_only, ops_counts = _ops_only_in(names, reports)
    said_first = differences(names, reports)
    verdict = noise.judge(names, reports, basis)
    totals = [{"run": n, "attention_gpu_us": _num(r.get("attention_gpu_us")),
               "attention_cpu_us": _num(r.get("attention_cpu_us")), "attention_share": r.get("attention_share"),
               "time_basis": r.get("time_basis"), "implementations": list(r.get("implementations") or []),
               "calls": r.get("calls")} for n, r in runs]
    return {
        "runs": names,
        "time_basis": basis,
        "time_basis_note": why,
        "differences": said_first,
        "noise": verdict,
        "summary": _summary(names, reports, basis, stages, said_first, verdict),
        "stages": stages,
        "layers": _layers(reports, key),
        "kernels_only_in": only,
        "kernels_only_in_counts": counts,
        "ops_only_in": ops_only,  # CPU runs have ops, not kernels: what ran in one run only
        "ops_only_in_counts": ops_counts,
        "kernel_changes": kernel_changes.changes(names, reports),  # same work, other tile/dtype/arch: by fingerprint
        "totals": totals,
        "memory": memory_compare.compare(runs),
        "steps": step_compare.compare(runs),  # the step's span, parts and idle beside attention's deltas
        "decomposition": decompose(names, reports, basis, verdict),
        # what each run's reading skipped or cut short: a side that is not the whole run must say so
        "warnings": {n: list(r.get("warnings") or []) for n, r in runs if r.get("warnings")},
    }
