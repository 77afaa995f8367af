"""The report's ``call_samples``: the events of sampled calls, for the one-call timeline."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..attention import patterns as kernel_table
from ..attention.detect import Call
from ..attention.metrics import Measured
from ..attention.stages import kernel_stage
from ..table import columns
from ..trace.link import Linked

MAX_SAMPLES = 64
MAX_SAMPLE_EVENTS = 400


def samples(L: Linked, calls: list[Call], first_calls: list[int], m: Measured) -> list[dict[str, Any]]:
    """Events of sampled calls, for the one-call timeline (times relative to the call's start): the
    first call of each layer (``first_calls``, in the order the layers were found), then the first of
    each layer in every later step, then the rest in trace order, up to MAX_SAMPLES, so every layer and
    every step can be picked."""
    out = []
    wanted = set(_sample_ids(calls, first_calls))
    chosen = [(c, [(c.lo, c.hi, "bwd" if c.info.get("backward_only") else "fwd")]
               + [(nd, L.subtree_end[nd], "bwd") for nd in c.bwd_nodes])
              for c in calls if c.id in wanted]
    needed = {j for _, ranges in chosen for lo, hi, _ in ranges for j in range(lo, hi)}
    by_op_kernels: dict[int, list] = {}
    if needed and L.kernels:
        mask = np.zeros(len(L.names) + 1, bool)  # [-1]: no op
        mask[list(needed)] = True
        for i in np.flatnonzero(mask[np.asarray(L.kernel_op, np.int64)]).tolist():
            k = L.kernels[i]
            by_op_kernels.setdefault(k.op, []).append(k)
    stream = _streams(L)
    corr = _correlations(L)
    cpu_ids = not L.kernels  # a CPU trace's reading names its ops by their ts (reading/expected.py _evidence_ids)

    for c, ranges in chosen:
        events: list[dict[str, Any]] = []
        times: list[float] = []  # each event's start (from t0) and duration, rounded together below
        t0 = L.ts[c.lo] if c.hi > c.lo else c.start
        for lo, hi, ps in ranges:
            bd = L.depth[lo] if hi > lo else 0
            for j in range(lo, hi):
                st = m.stage_of[j] or "other"
                events.append({"name": L.names[j], "kind": "op", "stage": st, "pass": ps, "start_us": None,
                               "dur_us": None, "depth": L.depth[j] - bd, "thread": str(L.thread_of(j)[1])})
                if cpu_ids:
                    events[-1]["ts_us"] = float(L.ts[j])
                times += (L.ts[j] - t0, L.dur[j])
                for k in by_op_kernels.get(j, ()):
                    events.append({"name": k.name, "kind": "kernel", "stage": kernel_stage(st, k.name), "pass": ps,
                                   "start_us": None, "dur_us": None, "depth": 0, "stream": stream(k), **corr(k)})
                    times += (k.ts - t0, k.dur)
        for k in c.kernels:
            fam = kernel_table.helper_family(k.name)
            events.append({"name": k.name, "kind": "kernel", "stage": fam.stage if fam else "fused",
                           "pass": (fam.pass_ or "fwd") if fam else "fwd", "start_us": None, "dur_us": None,
                           "depth": 0, "stream": stream(k), **corr(k)})
            times += (k.ts - t0, k.dur)
        times = columns.rounded(times)  # round(x, 3) of each, at C speed
        for ev, a, b in zip(events, times[0::2], times[1::2]):
            ev["start_us"], ev["dur_us"] = a, b
        end = max((ev["start_us"] + ev["dur_us"] for ev in events), default=0.0)
        out.append({"id": c.id, "layer": c.layer, "step": c.step, "implementation": c.implementation,
                    "start_us": round(t0, 3), "dur_us": round(end, 3), "truncated": len(events) > MAX_SAMPLE_EVENTS,
                    "events": events[:MAX_SAMPLE_EVENTS]})
    return out


def _correlations(L: Linked):
    """A kernel's correlation id as a sample event's field ({} where the trace records none): the id the
    reading's evidence names it by (reading/expected.py _evidence_ids), so the tab can link a claim to it."""
    kt = L.kernel_table
    assert kt is not None  # link always sets it
    has, corr = kt.has("correlation"), kt["correlation"]
    return lambda k: {"correlation": int(corr[k.i])} if has[k.i] else {}


def _sample_ids(calls: list[Call], first_calls: list[int]) -> list[int]:
    ids = list(first_calls)
    by_order = sorted(calls, key=lambda c: (c.step, c.start))
    seen_layer_step = set()
    for c in by_order:  # the first call of each layer in every step
        if (c.layer, c.step) not in seen_layer_step:
            seen_layer_step.add((c.layer, c.step))
            ids.append(c.id)
    ids += [c.id for c in by_order]  # then any call
    return list(dict.fromkeys(ids))[:MAX_SAMPLES]


def _streams(L: Linked):
    """The GPU stream a kernel ran on, as a function of the kernel: kineto writes it in args and as
    the event's tid (read from the kernels' columns)."""
    kt = L.kernel_table
    assert kt is not None  # link always sets it
    has, stream = kt.has("stream"), kt["stream"]
    return lambda k: str(stream[k.i] if has[k.i] else k.tid)
