"""Per-rank summary of one distributed job: attention time per rank by stage, the slowest rank and
the imbalance (max / median), ranks whose implementation or SDPA backend differs from the rest,
and per-layer spread across ranks.

Input is the compact reports of one run (one per rank); nothing here reads a trace. Median and
max are over the ranks' attention time on the run's time basis (GPU kernel time when every rank
has GPU kernels, else CPU op time), so an imbalance of 1.6 means the slowest rank spent 1.6x the
median rank's time in attention.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from ..format.tags import STAGES
from ..text.words import duration
from .identify import rank_of, worker_of

MAX_LAYERS = 200  # rows of the per-layer spread table, largest spread first
MAX_LISTED = 100  # missing / unranked names listed (a job of 4,096 ranks must stay compact)
RANKS_FORMAT = 1


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b > 0 else None


def summarize_ranks(reports: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The rank summary of one run's reports, or None when fewer than two distinct ranks are found
    (a single-process run has no ranks to compare). A rank seen twice keeps its first report; the
    others are listed in ``duplicate_ranks`` (worker names that carry a node's local rank, say)."""
    by_rank: dict[int, Mapping[str, Any]] = {}
    found: dict[int, tuple[int | None, str]] = {}
    unranked: list[str] = []
    duplicates: list[dict[str, Any]] = []
    for r in reports:
        worker = worker_of(r) or "?"
        who = rank_of(r)
        if who is None:
            unranked.append(worker)
            continue
        rank, world, source = who
        if rank not in by_rank:
            by_rank[rank] = r
            found[rank] = (world, source)
        else:
            kept = worker_of(by_rank[rank]) or "?"
            duplicates.append({"rank": rank, "worker": worker, "kept": kept, "rank_from": source})
    if len(by_rank) < 2:
        return None
    from ..report.compare import time_basis  # here: compare's modules load only for a run of ranks

    ranks = sorted(by_rank)
    reps = [by_rank[k] for k in ranks]
    basis, basis_why = time_basis(reps)
    key = "gpu_us" if basis == "gpu" else "cpu_us"
    worlds = Counter(w for w, _ in found.values() if w)
    world = worlds.most_common(1)[0][0] if worlds else None

    rows = []
    present: set[str] = set()
    for k, r in zip(ranks, reps):
        stages: dict[str, float] = {}
        for s in r.get("stages") or []:
            st = s.get("stage")
            if st in STAGES:
                stages[st] = stages.get(st, 0.0) + _num(s.get(key))
        present.update(st for st, v in stages.items() if v > 0)
        impls = sorted({str(i.get("implementation")) for i in r.get("implementations") or [] if i.get("implementation")})
        backends = sorted({lay.backend for lay in r.get("layers") or [] if lay.backend})
        rows.append({
            "rank": k, "worker": worker_of(r), "rank_from": found[k][1],
            "attention_us": round(_num(r.get(f"attention_{key}")), 3), "total_us": round(_num(r.get(f"total_{key}")), 3),
            "calls": int(_num(r.get("calls"))), "stages": {st: round(v, 3) for st, v in stages.items()},
            "implementations": impls, "backends": backends,
            # kernel launches without their kernel (report.gpu_window): this rank's GPU time is a lower bound
            "gpu_unrecorded_launches": int(_num((r.get("gpu_window") or {}).get("unrecorded_launches"))),
        })
    med = _median([row["attention_us"] for row in rows])
    for row in rows:
        row["vs_median"] = _ratio(row["attention_us"], med)
    slow = max(rows, key=lambda row: (row["attention_us"], -row["rank"]))
    fast = min(rows, key=lambda row: (row["attention_us"], row["rank"]))
    # No rank has attention: there is no slowest rank to name (every rank ties at nothing).
    any_attention = slow["attention_us"] > 0
    missing = sorted(set(range(world)) - set(ranks)) if world else []
    doc: dict[str, Any] = {
        "ranks_format": RANKS_FORMAT,
        "time_basis": basis,
        "time_basis_reason": basis_why,
        "world_size": world,
        "rank_count": len(rows),
        "missing_ranks": missing[:MAX_LISTED],
        "missing_count": len(missing),
        "unranked_workers": unranked[:MAX_LISTED],
        "unranked_count": len(unranked),
        "duplicate_ranks": duplicates[:MAX_LISTED],
        "duplicate_count": len(duplicates),
        "stages": [st for st in STAGES if st in present],
        "ranks": rows,
        "median_us": round(med, 3),
        "slowest": {"rank": slow["rank"], "worker": slow["worker"], "attention_us": slow["attention_us"]}
        if any_attention else None,
        "fastest": {"rank": fast["rank"], "worker": fast["worker"], "attention_us": fast["attention_us"]}
        if any_attention else None,
        "imbalance": _ratio(slow["attention_us"], med),
        "odd_ranks": _odd_ranks(rows),
        "layers": _layer_spread(ranks, reps, key),
    }
    doc["headline"] = headline(doc)
    return doc


def _odd_ranks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranks whose set of implementations (or SDPA backends) is not the one most ranks have: the
    rank that fell back to the math backend, or ran eager while the others ran flash."""
    out = []
    for field, what in (("implementations", "implementation"), ("backends", "backend")):
        sigs = Counter(tuple(row[field]) for row in rows)
        if len(sigs) < 2:
            continue
        usual, n = sigs.most_common(1)[0]
        if list(sigs.values()).count(n) > 1:
            usual = min(s for s, c in sigs.items() if c == n)  # a tie: the first in order, so it is stable
        for row in rows:
            if tuple(row[field]) != usual:
                out.append({"rank": row["rank"], "worker": row["worker"], "what": what,
                            "value": "+".join(row[field]) or "none", "usual": "+".join(usual) or "none"})
    return out


def _layer_spread(ranks: list[int], reps: list[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    per_layer: dict[str, list[tuple[float, int]]] = {}
    for k, r in zip(ranks, reps):
        for lay in r.get("layers") or []:
            per_layer.setdefault(lay.layer, []).append((getattr(lay, key), k))
    rows = []
    for name, vals in per_layer.items():
        times = [v for v, _ in vals]
        med = _median(times)
        hi_v, hi_rank = max(vals, key=lambda vr: (vr[0], -vr[1]))
        rows.append({"layer": name, "ranks": len(vals), "median_us": round(med, 3), "min_us": round(min(times), 3),
                     "max_us": round(hi_v, 3), "spread": _ratio(hi_v, med), "slowest_rank": hi_rank})
    rows.sort(key=lambda row: (-(row["spread"] or 0.0), -row["max_us"], row["layer"]))
    return rows[:MAX_LAYERS]


def times(ratio: float) -> str:
    """A ratio as the headline says it: two significant digits (1.6, 2, 12), whole numbers from 10 on
    (123, never 1.2e+02), and a third digit where two would round a slower rank to "1" (1.04)."""
    if ratio >= 9.95:
        return f"{ratio:.0f}"
    text = f"{ratio:.2g}"
    return f"{ratio:.3g}" if text == "1" and ratio >= 1.005 else text


def headline(doc: Mapping[str, Any]) -> str:
    """"slowest rank 5: attention 1.6× the median (12.3 ms vs 7.7 ms)" and what else stands out;
    "no rank has attention ..." when no rank found any (then no rank is slowest)."""
    s = doc["slowest"]
    if s is None:
        calls = sum(int(r.get("calls") or 0) for r in doc["ranks"])
        why = (f"{calls} attention calls with no {doc['time_basis'].upper()} time" if calls
               else "no attention call found on any rank")
        return f"no rank has attention: {doc['rank_count']} ranks, {why}; nothing to compare across ranks" + _unrecorded(doc)
    ratio = doc.get("imbalance")
    text = (f"slowest rank {s['rank']}: attention {times(ratio)}× the median" if ratio is not None
            else f"slowest rank {s['rank']}: the median rank has no attention time")
    text += f" ({duration(s['attention_us'])} vs {duration(doc['median_us'])}, {doc['time_basis'].upper()} time)"
    return text + _unrecorded(doc)


def _unrecorded(doc: Mapping[str, Any]) -> str:
    """'; ranks 3, 7 lost kernels (GPU window cut): their times are lower bounds' on the GPU basis."""
    cut = [r["rank"] for r in doc.get("ranks") or () if r.get("gpu_unrecorded_launches")]
    if not cut or doc.get("time_basis") != "gpu":
        return ""
    shown = ", ".join(str(k) for k in cut[:8]) + (" …" if len(cut) > 8 else "")
    return (f"; rank{'s' if len(cut) > 1 else ''} {shown} lost kernels (GPU window cut): "
            f"{'their' if len(cut) > 1 else 'its'} attention time is a lower bound")
