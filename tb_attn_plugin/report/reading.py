"""The report's ``reading`` section: each layer type × implementation read the way the post reads
one attention call (expected against actual kernels, the cost on the host; docs/api.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..attention import expected, host_cost
from ..attention.detect import Call
from ..trace.link import Linked

MAX_GROUPS = 200  # layer type × implementation pairs; a trace without module scopes can name many


def build(L: Linked, calls: list[Call], call_of: list[int], stage_of: list, ev, has_gpu: bool) -> list[dict[str, Any]]:
    """One row per (layer type, implementation), most calls first; ``ev``: the trace's events (its
    launches' columns)."""
    exp = expected.group(calls, expected.read_calls(L, calls, call_of, stage_of, has_gpu))
    host = host_cost.group(calls, host_cost.host_costs(L, calls, ev, has_gpu))
    counts = Counter((c.layer_type, c.implementation) for c in calls)
    rows = []
    for (lt, im), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        rows.append({"layer_type": lt, "implementation": im, "calls": n,
                     "expected": exp.get((lt, im)), "host": host.get((lt, im))})
    return rows[:MAX_GROUPS]
