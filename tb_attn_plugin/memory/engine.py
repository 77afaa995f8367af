"""Entry points: the memory section of a trace's report, a snapshot's own report, and the
snapshots that join a trace (the collector names them ``{worker}.{time}.memory.pickle``)."""

from __future__ import annotations

import gc
import math
import os
import time
from typing import Any, Sequence

import numpy as np

from ..attention import shapes
from ..format.errors import TraceError
from ..format.report.layers import Layer
from ..table import columns
from ..trace.read import is_url
from ..format.version import ENGINE_VERSION, SCHEMA_VERSION
from . import attribute, profiler_events, section, stack_attribution
from . import snapshot as snap
from .rows import text_of
from .joining import is_snapshot_path, joining_names  # noqa: F401  (is_snapshot_path: cli_paths, plugin/work)

NO_MEMORY = ("no memory events in this trace: record them with torch.profiler.profile(profile_memory=True) "
             "or tb_attn_plugin.profile(..., memory=True)")


Slots = tuple  # (each op's slot id, -1 outside calls; the (call, stage, in backward) of each id): Measured.slot


def _trace_spans(L, calls, slots: Slots, in_calls: Sequence[int]) -> dict[int, dict]:
    """Per call: (stage, pass) -> [first start, last end] of its ops, for shading the curve."""
    out: dict[int, dict] = {c.id: {} for c in calls}
    slot, keys = slots
    for k, span in columns.spans(in_calls, (slot,), None, L.ts, L.dur).items():
        c, st, b = keys[k]
        out[c][(st, "bwd" if b else "fwd")] = span
    return out


def slots_of(L, call_of: list[int], stage_of: list[str | None], in_calls: list[int]) -> Slots:
    """The slots Measured holds, for a caller that has only the columns they are made of."""
    return columns.keyed(in_calls, (call_of, stage_of, L.bwd_column), "other", len(L.names))


def from_trace(ev, L, calls, slots: Slots, warnings: list[str] | None,
               in_calls: Sequence[int]) -> dict[str, Any] | None:
    """The memory section from the profiler's [memory] events (None when the trace has none).
    Call layers must already be named. ``slots``: (Measured.slot, Measured.slot_keys);
    ``in_calls``: the ops in some call (Measured.member_at, or members)."""
    try:
        got = _attributed(ev, L, slots, in_calls)
    except OverflowError:
        if warnings is not None:
            warnings.append("memory events left out: their byte counts add up beyond any real memory")
        return None
    if got is None:
        return None
    tls, tl, att = got
    spans = _trace_spans(L, calls, slots, in_calls)
    infos = []
    for c in calls:
        sb = shapes.score_bytes(c.info.get("shape"), c.info.get("dtype"))
        # Only the stages a time window shows: the call's own "other" ops cover its whole window.
        sp = [(st, ps, a, b) for (st, ps), (a, b) in spans.get(c.id, {}).items() if st != "other"]
        infos.append(section.CallInfo(c.layer, c.step, sb, sp))
    devices = [{"device": d, "peak_bytes": t.peak_bytes(), "events": len(t)}
               for d, t in sorted(tls.items())]
    return section.build(tl, att, infos, source="profiler", devices=devices,
                         score_events=section.score_path_events(tl.delta, att, infos, L))


def _attributed(ev, L, slots: Slots, in_calls: Sequence[int]):
    """(every device's timeline, the main device's, its events' calls and stages) from the profiler's
    [memory] events; None without any. Raises OverflowError for byte counts beyond any real memory."""
    tls = profiler_events.timelines(ev.memory)
    dev = profiler_events.main_device(tls)
    if dev is None:
        return None
    tl = tls[dev]
    return tls, tl, attribute.from_trace(tl, L, slots, in_calls)


def score_blocks(ev, L, calls, call_of: list[int], stage_of: list[str | None],
                 in_calls: list[int]) -> list[tuple[float, float, int]]:
    """Score-matrix blocks seen in the profiler's [memory] events, as (alloc time, free time, bytes):
    an allocation made by a score-path op of a call, of that call's B·H·Lq·Lk·itemsize (the rule of
    the report's score_matrix numbers: section.score_path_events); one never freed lasts to the last
    event. [] without any."""
    try:
        got = _attributed(ev, L, slots_of(L, call_of, stage_of, in_calls), in_calls)
    except OverflowError:
        return []
    if got is None:
        return []
    _, tl, att = got
    infos = [section.CallInfo(c.layer, c.step, shapes.score_bytes(c.info.get("shape"), c.info.get("dtype")))
             for c in calls]
    t, pair = tl.t, tl.pair
    out = []
    for i in np.flatnonzero(np.frombuffer(bytes(section.score_path_events(tl.delta, att, infos, L)), np.uint8)).tolist():
        j = pair[i]
        out.append((t[i], t[j] if j >= 0 else t[-1], int(tl.delta[i])))
    return out


def _tag_score_bytes(f: dict) -> int | None:
    """B·H·Lq·Lk·itemsize from a call tag's fields (the same dict object for every call of a layer)."""
    if not all(isinstance(f.get(k), int) for k in ("b", "hq", "lq", "lk")):
        return None
    return f["b"] * f["hq"] * f["lq"] * f["lk"] * shapes.ITEMSIZE.get(str(f.get("dtype") or "float32"), 4)


def snapshot_section(path: str) -> dict[str, Any]:
    """The memory section of one snapshot pickle (its largest device), attributed by its annotations."""
    gc_was = gc.isenabled()
    gc.disable()  # the snapshot's entries are a million small dicts, none cyclic
    try:
        return _snapshot_section(path)
    finally:
        if gc_was:
            gc.enable()


UNKNOWN = section.UNKNOWN


def _snapshot_section(path: str) -> dict[str, Any]:
    s = snap.load(path)
    peak_of = {d: r.timeline.peak_bytes() for d, r in s.devices.items()}
    dev = max(s.devices, key=peak_of.__getitem__)
    att, acalls = attribute.from_annotations(s.devices[dev].timeline, s.annotations)
    framed: dict[int, stack_attribution.FrameAttribution] = {}
    if acalls:
        how = {"by": "annotations"}
        infos = [section.CallInfo(c.layer, -1, _tag_score_bytes(c.info), [("call", "fwd", c.start_us, c.end_us)])
                 for c in acalls]
        score_events = None
    else:
        # No collector annotations: the allocations' own stacks, on every device; the section is
        # the device where attention ran (the most attention bytes), else the largest peak.
        for d, r in s.devices.items():
            framed[d] = stack_attribution.attribute(r.timeline, r.rows, r.entry)
        att_bytes = {d: sum(int(r.timeline.delta[i]) for i in range(len(r.timeline)) if f.attribution.slot[i] >= 0)
                     for d, r in s.devices.items() if (f := framed[d]).calls}
        if att_bytes:
            dev = max(att_bytes, key=lambda d: (att_bytes[d], peak_of[d]))
        fa = framed[dev]
        att, score_events = fa.attribution, fa.score_events
        how = dict(fa.summary) if fa.calls else {"by": "unknown", "reason": UNKNOWN}
        how["devices_with_attention"] = [f"cuda:{d}" for d in sorted(att_bytes)]
        infos = [section.CallInfo(c.layer, -1, c.score_bytes, _frame_spans(s.devices[dev].timeline, c))
                 for c in fa.calls]
        acalls = []
    rec = s.devices[dev]
    tl = rec.timeline
    churn = dict(rec.churn)
    ooms = churn.pop("ooms")
    for o in ooms:
        o.pop("entry", None)
        hit = next((c for c in acalls if c.start_us <= o["time_us"] <= c.end_us), None)
        o["layer"] = hit.layer if hit else None
    churn["ooms"] = ooms
    rows, entry_ix = rec.rows, rec.entry

    def frame_of(i: int) -> str | None:
        return rows.frame_text(entry_ix[i])

    def stack_of(i: int) -> list[str] | None:
        k = rows.stack[entry_ix[i]] if len(rows.stack) else -1
        return [text_of(rows.frames[f]) for f in rows.stacks[k]] if k >= 0 else None

    devices = [{"device": f"cuda:{d}", "peak_bytes": int(peak_of[d]), "events": len(r.timeline)}
               for d, r in sorted(s.devices.items())]
    for row, d in zip(devices, sorted(s.devices)):
        if d in framed:
            fa_d = framed[d]
            row["attention_calls"] = len(fa_d.calls)
    out = section.build(tl, att, infos, source="snapshot", churn=churn, frame_of=frame_of,
                        time_basis=rec.time_basis, devices=devices, score_events=score_events,
                        stack_of=stack_of, attention_known=how["by"] != "unknown")
    out["attribution"] = how
    if how["by"] == "frames":
        out["attribution"]["gqa_layers"] = sorted({c.layer for c in framed[dev].calls if c.gqa})
    out["snapshot"] = {"file": os.path.basename(path), "entries": s.entries, "segments": s.segments,
                       "annotations": len(s.annotations),
                       "allocator_settings": {str(k)[:100]: v for k, v in s.settings.items() if _plain_setting(v)}}
    return out


def _frame_spans(tl, c) -> list[tuple[str, str, float, float]]:
    """(stage, pass, first, last allocation time) of a call found from frames, for shading the curve."""
    got: dict[tuple[str, str], list[float]] = {}
    for st, i, _, ps in c.stages:
        t = tl.t[i]
        span = got.setdefault((st, ps), [t, t])
        span[0], span[1] = min(span[0], t), max(span[1], t)
    return [(st, ps, a, b) for (st, ps), (a, b) in got.items()]


def _plain_setting(v: Any) -> bool:
    """An allocator setting the report can carry: None, a bool, a bounded int, a finite float, a short string."""
    if v is None or isinstance(v, bool):
        return True
    if isinstance(v, int):
        return -(1 << 62) < v < 1 << 62
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str) and len(v) <= 200


def snapshot_report(path: str) -> dict[str, Any]:
    """``tb-attn report FILE.pickle``: a report holding only the snapshot's memory section."""
    t0 = time.perf_counter()
    mem = snapshot_section(path)
    return {"schema_version": SCHEMA_VERSION, "engine_version": ENGINE_VERSION, "kind": "memory_snapshot",
            "source": {"path": str(path), "file": os.path.basename(str(path))}, "memory": mem,
            "warnings": [], "analysis_seconds": round(time.perf_counter() - t0, 4)}


def joining_snapshots(trace_path: str) -> list[str]:
    """Snapshots that belong to a local trace (see joining_names)."""
    d, name = os.path.split(str(trace_path))
    try:
        names = sorted(os.listdir(d or "."))
    except OSError:
        return []
    return [os.path.join(d, n) for n in joining_names(name, names)]


def join(sec: dict[str, Any] | None, warnings: list[str], trace_path: str,
         paths: list[str] | None = None) -> dict[str, Any] | None:
    """The memory section with the snapshots beside a trace (or ``paths``) joined: the snapshot's section
    when the trace has no memory events (``sec`` None), else ``sec`` with it under ``snapshot_section``.
    A bad snapshot is a warning, not a failure."""
    for p in joining_snapshots(trace_path) if paths is None else paths:
        try:
            snap_sec = snapshot_section(p)
        except TraceError as exc:
            warnings.append(f"memory snapshot {exc}")
            continue
        if sec is None:
            sec = snap_sec
        else:
            sec["snapshot_section"] = snap_sec
        break
    return sec


def report_section(ev, L, calls, m, warnings: list[str], path: str, snapshots: list[str] | None,
            layers: list[Layer]) -> dict[str, Any] | None:
    """The report's memory section (profiler events, and a snapshot beside the trace: ``snapshots``, or
    None to find them beside a local trace); each layer's memory_bytes is its largest peak growth there."""
    sec = from_trace(ev, L, calls, (m.slot, m.slot_keys), warnings, m.member_at)
    if snapshots is not None:
        sec = join(sec, warnings, path, snapshots)
    elif not is_url(path):
        sec = join(sec, warnings, path)
    if sec is not None:
        growth = {r["layer"]: r["peak_growth_bytes"] for r in sec["layers"] if r["allocs"]}
        for lay in layers:
            if lay.layer in growth:
                lay.memory_bytes = growth[lay.layer]
    return sec
