"""Where a speed-up comes from: the attention time difference between two runs, split into memory
traffic, compute efficiency, kernel launches, CPU-side overhead and the rest.

Each run's time (report ``roofline.timing[basis]``) is already split into parts that sum to its
wall time (section.py states how); the decomposition is the part-by-part difference, last run
minus first, so the parts sum exactly to the measured difference (rounding goes into ``rest``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..text.units import bytes_text, duration_text

PARTS = ("memory", "compute", "launch", "cpu", "rest")
LABELS = {"memory": "memory traffic", "compute": "compute efficiency", "launch": "kernel launches",
          "cpu": "CPU-side overhead", "rest": "the rest (projections, copies, unmodelled stages)"}


def _timing(r: Mapping[str, Any], basis: str) -> Mapping[str, Any] | None:
    rf = r.get("roofline")
    t = (rf.get("timing") or {}).get(basis) if isinstance(rf, Mapping) else None
    return t if isinstance(t, Mapping) and isinstance(t.get("parts_us"), Mapping) else None


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _opt(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _score_bytes(r: Mapping[str, Any]) -> int:
    rows = (r.get("roofline") or {}).get("layers") or []
    return max((int(_num(x.get("score_bytes"))) for x in rows if isinstance(x, Mapping)), default=0)


def decompose(names: Sequence[str], reports: Sequence[Mapping[str, Any]], basis: str,
              noise: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The decomposition of last minus first in ``basis`` ("gpu"/"cpu"); None when a report has no
    roofline timing (reports of an older engine). ``noise`` (report/noise.py's verdict): a difference
    not beyond noise is no saving, and its sentence says so instead."""
    a, b = _timing(reports[0], basis), _timing(reports[-1], basis)
    if a is None or b is None:
        return None
    measured = round(_num(b.get("wall_us")) - _num(a.get("wall_us")), 3)
    parts = {p: round(_num(b["parts_us"].get(p)) - _num(a["parts_us"].get(p)), 3) for p in PARTS}
    parts["rest"] = round(parts["rest"] + measured - sum(parts.values()), 3)  # rounding, so the sum is exact
    units_a, units_b = int(_num(a.get("units"))), int(_num(b.get("units")))
    out = {
        "basis": basis,
        "runs": [names[0], names[-1]],
        "wall_us": [_num(a.get("wall_us")), _num(b.get("wall_us"))],
        "busy_us": [_num(a.get("busy_us")), _num(b.get("busy_us"))],
        "measured_us": measured,
        "parts_us": parts,
        "bytes": [_num(a.get("bytes")), _num(b.get("bytes"))],
        "bandwidth_tbs": [a.get("bandwidth_tbs"), b.get("bandwidth_tbs")],
        "memory_floor_us": [_opt(a.get("memory_floor_us")), _opt(b.get("memory_floor_us"))],
        "units": [units_a, units_b],
        "unit": "kernels" if basis == "gpu" else "ops",
        "score_bytes": [_score_bytes(reports[0]), _score_bytes(reports[-1])],
        "noise": str((noise or {}).get("verdict") or "cannot_tell"),
    }
    out["sentence"] = sentence(out)
    return out


def _ms(us: float) -> str:
    return duration_text(abs(us), 3)


def _mib(n: float) -> str:
    return bytes_text(abs(n))


def sentence(d: dict[str, Any]) -> str:
    """'sdpa saved 381 ms of 513 ms: 302 ms from never writing the 820 MiB score matrix, ...'."""
    first, last = d["runs"]
    before = d["wall_us"][0]
    delta = d["measured_us"]
    noise = d.get("noise", "beyond_noise")
    more = "more" if delta >= 0 else "less"
    took = f"{last} took {_ms(delta)} {more} than {first}'s {_ms(before)} attention time ({d['basis'].upper()}, gaps included)"
    if noise == "within_noise":  # no saving to explain: say what it is, split nothing
        return f"within noise: {took}; the parts below split noise, not a saving"
    if noise == "beyond_noise":
        verb = "saved" if delta < 0 else "spent"
        head = f"{last} {verb} {_ms(delta)} of {first}'s {_ms(before)} attention time ({d['basis'].upper()}, gaps included)"
    else:  # too few steps to know: where the difference lies, never called a saving
        head = f"cannot tell whether this is noise: {took}"
    pieces = []
    for p in sorted(PARTS, key=lambda p: -abs(d["parts_us"][p])):
        v = d["parts_us"][p]
        if abs(v) < max(1e-3, 0.005 * abs(delta)):
            continue
        sign = "" if (v < 0) == (delta < 0) else ("+" if v > 0 else "-")
        pieces.append(f"{sign}{_ms(v)} {_why(p, d, v)}")
    return head + (": " + ", ".join(pieces) if pieces else "")


def _why(part: str, d: dict[str, Any], v: float) -> str:
    if part == "memory":
        moved = d["bytes"][1] - d["bytes"][0]
        sa, sb = d["score_bytes"]
        fa, fb = d.get("memory_floor_us") or [None, None]
        floor = ""
        if fa is not None and fb is not None:
            floor = f", {_ms(fb - fa)} of it at the roof's bandwidth"
        if sa and not sb and moved < 0:
            return f"from never writing the {_mib(sa)} score matrix ({_mib(moved)} less memory traffic{floor})"
        return f"from {_mib(moved)} {'less' if moved < 0 else 'more'} memory traffic{floor}"
    if part == "launch":
        n = d["units"][1] - d["units"][0]
        if n:
            return f"from {abs(n)} {'fewer' if n < 0 else 'more'} {d['unit']}"
        return "from the launch gaps between kernels" if d["unit"] == "kernels" else "from op dispatch"
    if part == "compute":
        return "from compute efficiency"
    if part == "cpu":
        return "from CPU-side overhead"
    return "from the rest"
