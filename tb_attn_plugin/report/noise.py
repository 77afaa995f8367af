"""Whether two runs' attention times differ beyond their step-to-step spread (numpy only, no scipy).

The samples are each run's attention time per profiler step (report ``steps``, the steps with at
least one attention call); where too few steps could never reach ALPHA (a one-step inference trace),
each call's time (report ``call_us``) stands in, when both runs have calls enough timed on the
comparison's basis. The test is the two-sided Mann-Whitney U test: exact (the distribution
of U over every ordering of the pooled steps, counted by recursion) when there are no ties and at
most EXACT_MAX steps per run, else the normal approximation with the tie correction. A difference
is "beyond noise" at p < ALPHA; where no ordering of so few steps could reach ALPHA, the answer is
"cannot tell", never a saving.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

ALPHA = 0.01
EXACT_MAX = 60
TEST = f"Mann-Whitney U, two-sided, over per-step attention time; beyond noise at p < {ALPHA:g}"


def step_samples(r: Mapping[str, Any], basis: str) -> list[float]:
    """Attention time (``basis`` "gpu"/"cpu", µs) of each profiler step that ran attention."""
    out = []
    for s in r.get("steps") or []:
        if not isinstance(s, Mapping):
            continue
        v, calls = s.get(f"attention_{basis}_us"), s.get("calls")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 \
                and isinstance(calls, int) and calls > 0:
            out.append(float(v))
    return out


def call_samples(r: Mapping[str, Any]) -> list[float]:
    """Each attention call's time on the report's basis (report ``call_us``), positive and finite ones."""
    got = r.get("call_us")
    if not isinstance(got, list):
        return []
    return [float(v) for v in got if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0]


def _u_counts(n1: int, n2: int) -> np.ndarray:
    """How many orderings of n1 + n2 distinct values give each U = 0 .. n1·n2 (float counts: exact
    to 2^53, and only ratios of them are used)."""
    # f[i][j] = counts for (i, j); f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u)
    prev = [np.ones(1) for _ in range(n2 + 1)]  # i = 0: U is 0 whatever j
    for i in range(1, n1 + 1):
        row = [np.ones(1)]  # j = 0: U is 0
        for j in range(1, n2 + 1):
            c = np.zeros(i * j + 1)
            a = prev[j]  # one fewer of the first sample: its largest element is above all j others
            c[j:j + len(a)] += a
            b = row[j - 1]
            c[:len(b)] += b
            row.append(c)
        prev = row
    return prev[n2]


def min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact test can give: both extreme orderings."""
    # int / int: exact, and 0.0 where C(n1 + n2, n1) is past a float (n1 = n2 = 600: 2.0 / C overflowed)
    return min(1.0, 2 / math.comb(n1 + n2, n1)) if n1 and n2 else 1.0


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, str]:
    """(U of x, two-sided p, "exact" | "normal approximation")."""
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    n1, n2 = len(xs), len(ys)
    pooled = np.concatenate([xs, ys])
    order = np.argsort(pooled, kind="mergesort")
    ranks = np.empty(len(pooled))
    sorted_v = pooled[order]
    # average ranks over ties
    uniq, first, counts = np.unique(sorted_v, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    mean = n1 * n2 / 2.0
    ties = bool((counts > 1).any())
    if not ties and max(n1, n2) <= EXACT_MAX:
        dist = _u_counts(n1, n2)
        total = dist.sum()
        lo = min(u, n1 * n2 - u)
        p = float(2.0 * dist[: int(round(lo)) + 1].sum() / total)
        return u, min(1.0, p), "exact"
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - float((counts ** 3 - counts).sum()) / (n * (n - 1)))
    if var <= 0:
        return u, 1.0, "normal approximation"
    z = (abs(u - mean) - 0.5) / math.sqrt(var)
    return u, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))), "normal approximation"


def judge(names: Sequence[str], reports: Sequence[Mapping[str, Any]], basis: str) -> dict[str, Any]:
    """The noise verdict for last vs first: "beyond_noise", "within_noise" or "cannot_tell", with the
    samples, their medians, p and the sentence that says it."""
    a, b = step_samples(reports[0], basis), step_samples(reports[-1], basis)
    unit = "step"
    same_basis = all(r.get("time_basis") == basis for r in (reports[0], reports[-1]))
    if min_p(len(a), len(b)) >= ALPHA and same_basis:
        # too few steps: the calls' spread stands in, where each run has calls enough and times on this basis
        ca, cb = call_samples(reports[0]), call_samples(reports[-1])
        if min_p(len(ca), len(cb)) < ALPHA:
            a, b, unit = ca, cb, "call"
    out: dict[str, Any] = {"test": TEST.replace("per-step", f"per-{unit}"), "alpha": ALPHA, "unit": unit,
                           "samples_us": [a, b], "median_us": [_median(a), _median(b)], "p_value": None, "method": None}
    first, last = names[0], names[-1]
    if min_p(len(a), len(b)) >= ALPHA:
        few = [f"{n} has {len(s) or 'no'} profiler step{'s' if len(s) != 1 else ''} with attention"
               for n, s in ((first, a), (last, b))]
        need = next(k for k in range(1, 100) if min_p(k, k) < ALPHA)
        out["verdict"] = "cannot_tell"
        out["headline"] = "cannot tell whether this is noise"
        out["why"] = (f"{' and '.join(few)} ({'too few calls to stand in' if same_basis else 'their calls are timed on different bases'}); no difference over so few steps can "
                      f"reach p < {ALPHA:g} ({TEST.split(';')[0]}): record at least {need} steps per run")
        out["sentence"] = f"{out['headline']}: {out['why']}"
        return out
    u, p, method = mann_whitney(a, b)
    out["p_value"] = float(f"{p:.3g}")
    out["method"] = method
    out["u"] = u
    beyond = p < ALPHA
    out["verdict"] = "beyond_noise" if beyond else "within_noise"
    over = "steps" if unit == "step" else "calls (too few steps: the calls' spread stands in for the steps')"
    spread = (f"per-{unit} medians {_us(out['median_us'][0])} and {_us(out['median_us'][1])} over {len(a)} and {len(b)} "
              f"{over}, p = {out['p_value']:g} by the {method} Mann-Whitney U test, two-sided")
    out["headline"] = "beyond noise" if beyond else "within noise"
    out["why"] = f"{spread}; beyond noise at p < {ALPHA:g}"
    out["sentence"] = f"{out['headline']}: {out['why']}"
    return out


def _median(s: list[float]) -> float | None:
    return round(float(np.median(s)), 3) if s else None


def _us(v: float | None) -> str:
    from ..text.words import duration

    return "unknown" if v is None else duration(v)
