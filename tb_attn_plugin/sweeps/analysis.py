"""What a sweep's cells say together (no torch): fitted exponents of time and memory against
sequence length, crossover points between backends, the best backend per (batch, seq_len) and the
OOM boundary. The CLI prints it and the plugin's /sweep route serves it to the Sweep view."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable


def series_name(rec: dict[str, Any]) -> str:
    return str(rec.get("module") or rec.get("backend"))


def _num(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
        return float(v)
    return None


def fit_exponent(points: Iterable[tuple[float, float]]) -> float | None:
    """Least-squares slope of log y against log x: y ∝ x^slope. None with fewer than two distinct x."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def _by_series(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[(series_name(r), r["batch"])].append(r)
    for v in out.values():
        v.sort(key=lambda r: r["seq_len"])
    return out


# torch.utils.benchmark's own mark of a noisy measurement ("(! 12%)" in the Compare table).
NOISY_IQR = 0.1
# Fewer timed blocks than this give no spread to judge (measure.py takes at least this many; cells
# recorded by older versions may have one).
MIN_SAMPLES = 3


def samples(r: dict[str, Any]) -> int:
    """Timed blocks of a cell: ``times_s`` in sweep.jsonl, ``samples`` where a reader kept only the count."""
    n = r.get("samples")
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    t = r.get("times_s")
    return len(t) if isinstance(t, list) else 0


def _spread(r: dict[str, Any]) -> float | None:
    """IQR / median, or None where it is unknown (fewer than MIN_SAMPLES timed blocks)."""
    med, iqr = _num(r.get("median_s")), r.get("iqr_s")
    if samples(r) < MIN_SAMPLES:
        return None
    return iqr / med if med and isinstance(iqr, (int, float)) and math.isfinite(iqr) else None


def fits(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per backend and batch: the exponents, and ``max_iqr_fraction``, the noisiest cell's IQR / median
    (an exponent fitted to noisy cells says little)."""
    out = []
    for (name, batch), rs in sorted(_by_series(records).items()):
        ok = [r for r in rs if r["status"] == "ok"]
        t = [(r["seq_len"], _num(r.get("median_s"))) for r in ok]
        m = [(r["seq_len"], _num(r.get("peak_bytes"))) for r in ok]
        out.append({"backend": name, "batch": batch,
                    "time_exponent": fit_exponent((x, y) for x, y in t if y),
                    "memory_exponent": fit_exponent((x, y) for x, y in m if y),
                    "seq_lens": [r["seq_len"] for r in ok],
                    "max_iqr_fraction": max((x for r in ok if (x := _spread(r)) is not None), default=None),
                    "few_sample_cells": sum(1 for r in ok if samples(r) < MIN_SAMPLES)})
    return out


def crossovers(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where two backends swap places in time, per batch: the length where the log-log lines between
    two measured lengths cross (geometric interpolation), with the lengths it lies between. A crossover
    drawn from a noisy cell (IQR over NOISY_IQR of its median) carries ``noisy_fraction``; one drawn from
    a cell with no known spread, ``noise_unknown``: either is not a crossover to rely on."""
    series = _by_series(records)
    by_batch: dict[int, dict[str, dict[int, float]]] = defaultdict(dict)
    spread: dict[tuple[str, int, int], float | None] = {}
    for (name, batch), rs in series.items():
        by_batch[batch][name] = {r["seq_len"]: t for r in rs if r["status"] == "ok" and (t := _num(r.get("median_s")))}
        for r in rs:
            if r["status"] == "ok":
                spread[(name, batch, r["seq_len"])] = _spread(r)
    out = []
    for batch, named in sorted(by_batch.items()):
        names = sorted(named)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                common = sorted(set(named[a]) & set(named[b]))
                for lo, hi in zip(common, common[1:]):
                    d_lo = math.log(named[a][lo] / named[b][lo])
                    d_hi = math.log(named[a][hi] / named[b][hi])
                    if d_lo == 0 or d_hi == 0 or (d_lo > 0) == (d_hi > 0):
                        continue
                    frac = d_lo / (d_lo - d_hi)
                    at = math.exp(math.log(lo) + frac * (math.log(hi) - math.log(lo)))
                    cells = [spread.get((n, batch, L)) for n in (a, b) for L in (lo, hi)]
                    noise = max((x for x in cells if x is not None), default=None)
                    out.append({"batch": batch, "backends": [a, b], "seq_len": at, "between": [lo, hi],
                                "faster_below": a if d_lo < 0 else b, "faster_above": a if d_hi < 0 else b,
                                "noisy_fraction": noise if noise is not None and noise > NOISY_IQR else None,
                                "noise_unknown": any(x is None for x in cells)})
    return out


def best(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        cells[(r["batch"], r["seq_len"])].append(r)
    out = []
    for (batch, L), rs in sorted(cells.items()):
        timed = [r for r in rs if r["status"] == "ok" and _num(r.get("median_s"))]
        # A cell with too few samples has no known spread: it is shown, never ranked.
        ok = sorted((r for r in timed if samples(r) >= MIN_SAMPLES), key=lambda r: r["median_s"])
        row: dict[str, Any] = {"batch": batch, "seq_len": L, "backend": None, "median_s": None, "runner_up": None,
                               "speedup": None, "statuses": {series_name(r): r["status"] for r in rs},
                               "unranked": sorted(series_name(r) for r in timed if samples(r) < MIN_SAMPLES),
                               "noisy_fraction": None}
        if ok:
            row.update(backend=series_name(ok[0]), median_s=ok[0]["median_s"])
            pair = ok[:2]
            if len(ok) > 1:
                row.update(runner_up=series_name(ok[1]), speedup=ok[1]["median_s"] / ok[0]["median_s"])
            noise = max((x for r in pair if (x := _spread(r)) is not None), default=None)
            if noise is not None and noise > NOISY_IQR:
                row["noisy_fraction"] = noise
        out.append(row)
    return out


def oom_boundary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per backend and batch that ran out of memory: the longest length that fit and the shortest that did not."""
    out = []
    for (name, batch), rs in sorted(_by_series(records).items()):
        oom = [r["seq_len"] for r in rs if r["status"] == "oom"]
        if not oom:
            continue
        ok = [r["seq_len"] for r in rs if r["status"] == "ok"]
        out.append({"backend": name, "batch": batch, "max_ok_seq_len": max(ok) if ok else None,
                    "min_oom_seq_len": min(oom)})
    return out


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[r["status"]] += 1
    return {"cells": len(records), "status_counts": dict(counts), "fits": fits(records),
            "crossovers": crossovers(records), "best": best(records), "oom_boundary": oom_boundary(records)}


def crossover_caveat(c: dict[str, Any]) -> str:
    """'' for a crossover of quiet cells, else why it is not one to rely on."""
    if c.get("noisy_fraction") is not None:
        return (f"; noisy: a cell's IQR is {100 * c['noisy_fraction']:.0f}% of its median, "
                "not a crossover to rely on")
    if c.get("noise_unknown"):
        return f"; noise unknown: a cell timed fewer than {MIN_SAMPLES} times or without its IQR, not a crossover to rely on"
    return ""


def render(records: list[dict[str, Any]]) -> str:
    """A few lines for the terminal after the Compare table."""
    s = summarize(records)
    lines = [f"cells: {s['cells']} (" + ", ".join(f"{k} {v}" for k, v in sorted(s["status_counts"].items())) + ")"]
    for f in s["fits"]:
        parts = []
        if f["time_exponent"] is not None:
            parts.append(f"time ~ L^{f['time_exponent']:.2f}")
        if f["memory_exponent"] is not None:
            parts.append(f"peak memory ~ L^{f['memory_exponent']:.2f}")
        noise = f["max_iqr_fraction"]
        if f["time_exponent"] is not None and noise is not None and noise > NOISY_IQR:
            parts.append(f"(noisy: a cell's IQR is {100 * noise:.0f}% of its median; the time exponent "
                         "is unreliable, rerun on a quieter machine or with a longer --min-run-time)")
        elif f["time_exponent"] is not None and f["few_sample_cells"]:
            parts.append(f"(noise unknown: {f['few_sample_cells']} cell(s) timed fewer than {MIN_SAMPLES} times; "
                         "the time exponent is unreliable)")
        if parts:
            lines.append(f"  {f['backend']:<10} B={f['batch']:<4} " + ", ".join(parts))
    for b in s["best"]:
        if b["backend"] and b["noisy_fraction"] is not None:
            lines.append(f"  best B={b['batch']} L={b['seq_len']}: {b['backend']}, but noisy (IQR "
                         f"{100 * b['noisy_fraction']:.0f}% of the median): not a ranking to rely on")
    for c in s["crossovers"]:
        lines.append(f"  crossover B={c['batch']}: {c['faster_below']} faster below L~{c['seq_len']:.0f}, "
                     f"{c['faster_above']} above (between {c['between'][0]} and {c['between'][1]})" + crossover_caveat(c))
    for o in s["oom_boundary"]:
        fit = f"fits up to L={o['max_ok_seq_len']}" if o["max_ok_seq_len"] else "never fits"
        lines.append(f"  out of memory: {o['backend']} B={o['batch']} {fit}, fails from L={o['min_oom_seq_len']}")
    return "\n".join(lines)
