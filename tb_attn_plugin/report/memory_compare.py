"""Memory deltas between runs for ``tb-attn compare`` and the plugin's /compare (last minus first)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..memory.section import gib
from .layer_match import match_layers


def compare(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """None unless at least two runs have a memory section."""
    mems = [(n, r.get("memory")) for n, r in runs]
    if sum(1 for _, m in mems if m) < 2:
        return None
    names = [n for n, _ in mems]

    def peak(m):
        return m["peak_bytes"] if m else None

    def score(m):
        return m["score_matrix"]["bytes_total"] if m else None

    peaks = [peak(m) for _, m in mems]
    # A layer's row is that of the layer it pairs with in the other runs (by module path, then by
    # position and shape), so eager, SDPA and compiled runs of one model share their rows.
    keys = match_layers([r for _, r in runs])
    layers: dict[str, dict[str, list]] = {}
    for i, (_, m) in enumerate(mems):
        for lay in (m or {}).get("layers", []):
            row = layers.setdefault(keys[i].get(lay["layer"], lay["layer"]), {"peak_growth_bytes": [None] * len(mems),
                                                   "score_matrix_blocks": [None] * len(mems)})
            row["peak_growth_bytes"][i] = lay["peak_growth_bytes"]
            row["score_matrix_blocks"][i] = lay["score_matrix_blocks"]
    rows = [{"layer": k, **v} for k, v in layers.items()]
    rows.sort(key=lambda r: -abs((r["peak_growth_bytes"][-1] or 0) - (r["peak_growth_bytes"][0] or 0)))
    first, last = peaks[0], peaks[-1]
    if first is not None and last is not None:
        pct = f" ({100.0 * (last - first) / first:+.0f}%)" if first else ""
        summary = f"{names[-1]} vs {names[0]}: peak {gib(first)} -> {gib(last)}{pct}"
    else:
        summary = f"peak {' / '.join(gib(p) if p is not None else 'not recorded' for p in peaks)}"
    s0, s1 = score(mems[0][1]), score(mems[-1][1])
    if s0 is not None and s1 is not None:
        summary += f"; score-matrix bytes {gib(s0)} -> {gib(s1)}"
    return {"runs": names, "summary": summary, "peak_bytes": peaks,
            "peak_delta_bytes": (last - first) if first is not None and last is not None else None,
            "score_matrix_bytes": [score(m) for _, m in mems],
            "attention_share_of_peak": [m["peak"]["attention_share"] if m and m.get("peak") else None for _, m in mems],
            "layers": rows}
