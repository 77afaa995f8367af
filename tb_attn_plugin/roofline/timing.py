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

import msgspec
import numpy as np

from ..attention.metrics import Measured
from ..table import columns
from ..trace.link import Linked

VIEW_OPS = frozenset({"aten::view", "aten::transpose", "aten::permute", "aten::expand", "aten::as_strided",
                      "aten::t", "aten::unsqueeze", "aten::squeeze", "aten::reshape", "aten::_reshape_alias",
                      "aten::slice", "aten::select", "aten::unflatten", "aten::alias", "aten::detach",
                      "aten::_unsafe_view", "aten::expand_as", "aten::view_as"})


class Timing(msgspec.Struct):
    idle_gpu_us: list[float]  # per call
    gaps_gpu: list[int]  # per call: how many gaps between its kernels
    wall_cpu_us: list[float]  # per call: its root ops' durations
    launch_gap_us: float | None
    dispatch_us: float | None
    all_gaps: list[float] = msgspec.field(default_factory=list)


def measure_timing(L: Linked, calls, call_of: list[int], m: Measured) -> Timing:
    n_calls = len(calls)
    idle, gaps_n, all_gaps = _gpu_gaps(L, call_of, m.kernel_call, n_calls)

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


def _gpu_gaps(L: Linked, call_of: list[int], kernel_call: list[int], n_calls: int
              ) -> tuple[list[float], list[int], list[float]]:
    """(per call its idle GPU time and its number of gaps, every positive gap) from the kernel columns.
    A kernel belongs to its op's call and pass, else (no op) to the call holding it, forward. Each
    (call, pass)'s kernels are sorted by (start, end); a gap is a start less the greatest end before
    it. A call's idle time adds its gaps group by group (groups in order of their first kernel), each
    in sorted order: the sums of a loop over the groups, to the bit (bincount adds in row order)."""
    op = np.asarray(L.kernel_op, np.int64)
    if not len(op):
        return [0.0] * n_calls, [0] * n_calls, []
    owner = np.append(np.fromiter(call_of, np.int64, len(call_of)), -1)  # [-1]: no op
    call = np.where(op >= 0, owner[op], np.asarray(kernel_call, np.int64))
    at = np.flatnonzero(call >= 0)
    if not len(at):
        return [0.0] * n_calls, [0] * n_calls, []
    call = call[at]
    key = call * 2 + np.append(L.bwd_column, False)[op[at]]  # (call, in backward)
    keys, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = np.argsort(np.argsort(first))[group]  # numbered by their first kernel
    start = L.kernel_ts[at]
    end = start + np.asarray(L.kernel_dur, np.float64)[at]
    order = np.lexsort((end, start, group))
    group, start, end, call = group[order], start[order], end[order], call[order]
    # the greatest end so far in each group: a running max over (group, rank of end), exact on ints
    ends, rank = np.unique(end, return_inverse=True)
    base = group * len(ends)
    reached = ends[np.maximum.accumulate(base + rank) - base]
    inner = np.flatnonzero(group[1:] == group[:-1]) + 1  # every kernel but its group's first
    gap = start[inner] - reached[inner - 1]
    gaps_n = np.bincount(call[inner], minlength=n_calls)
    pos = gap > 0
    idle = np.bincount(call[inner][pos], weights=gap[pos], minlength=n_calls).astype(np.float64)  # (ints if none)
    return idle.tolist(), gaps_n.tolist(), gap[pos].tolist()
