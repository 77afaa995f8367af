"""Where an attention call's time goes between its kernels (GPU) or ops (CPU): busy, idle gaps, counts.

GPU: a call's kernels, per pass, sorted by start; the idle time is the sum of the gaps between the
end of the kernels so far and the next start (overlaps count no gap). The launch gap of a run is
the median of those gaps: what back-to-back launches cost; longer gaps are the GPU waiting for
the CPU. CPU: a call's wall time is the duration of its root ops (forward and backward); its busy
time the self time of its ``cpu_op`` events, the rest is Python and scopes around them; an op's
dispatch cost is the median self time of the metadata-only ops (views) in attention calls.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..attention.metrics import Measured
from ..trace import columns
from ..trace.link import Linked

VIEW_OPS = frozenset({"aten::view", "aten::transpose", "aten::permute", "aten::expand", "aten::as_strided",
                      "aten::t", "aten::unsqueeze", "aten::squeeze", "aten::reshape", "aten::_reshape_alias",
                      "aten::slice", "aten::select", "aten::unflatten", "aten::alias", "aten::detach",
                      "aten::_unsafe_view", "aten::expand_as", "aten::view_as"})


@dataclass
class Timing:
    idle_gpu_us: list[float]  # per call
    gaps_gpu: list[int]  # per call: how many gaps between its kernels
    wall_cpu_us: list[float]  # per call: its root ops' durations
    launch_gap_us: float | None
    dispatch_us: float | None
    all_gaps: list[float] = field(default_factory=list)


def measure_timing(L: Linked, calls, call_of: list[int], m: Measured) -> Timing:
    n_calls = len(calls)
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    node_of = L.node_of
    for k in L.kernels:
        op = k.op
        if op >= 0:
            c = call_of[op]
            ps = "bwd" if node_of[op] >= 0 else "fwd"
        else:
            c = m.kernel_call.get(id(k), -1)
            ps = "fwd"
        if c < 0:
            continue
        spans.setdefault((c, ps), []).append((k.ev.ts, k.ev.ts + k.ev.dur))
    idle = [0.0] * n_calls
    gaps_n = [0] * n_calls
    all_gaps: list[float] = []
    for (c, _), iv in spans.items():
        iv.sort()
        end = iv[0][1]
        for s, e in iv[1:]:
            g = s - end
            if g > 0:
                idle[c] += g
                all_gaps.append(g)
            gaps_n[c] += 1
            end = max(end, e)

    wall = [0.0] * n_calls
    for c in calls:
        if c.hi > c.lo:
            wall[c.id] += L.dur[c.lo]
        for nd in c.bwd_nodes:
            if 0 <= nd < len(L.dur):
                wall[c.id] += L.dur[nd]
    views = columns.picked(m.cpu_members, *L.name_ids(VIEW_OPS), L.self_cpu)
    return Timing(idle, gaps_n, wall, statistics.median(all_gaps) if all_gaps else None,
                  statistics.median(views) if views else None, all_gaps)
