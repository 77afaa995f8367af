"""One trace file in, one compact report (a JSON-ready dict; its format: format/report/) out.

The report stays plain dicts here (the format's Structs are checked against real reports in
tests/test_format_generated.py): a new key written here without its field in format/report/ fails
the tests, not a user's analysis.

The pipeline reads in data order: read -> decode -> link -> detect -> measure -> report.
"""

from __future__ import annotations

import gc
import os
import time
from bisect import bisect_left
from collections import Counter
from functools import lru_cache
from typing import Any, Callable

import msgspec
import numpy as np

from ..attention import patterns as kernel_table
from ..attention import child_shapes, heads, safety, shapes
from ..attention.detect import Call, detect
from ..roofline.devices import describe
from ..attention.patterns import is_vendor_op, needs_shapes
from ..attention.metrics import PASSES, Cell, layer_type_of_path, measure
from ..attention.stages import kernel_stage
from ..format import tags
from ..text import units
from ..memory import engine as memory
from ..overview import phases
from ..overview import section as overview
from ..reading import section as reading
from ..roofline.section import build as build_roofline
from ..table import columns
from ..trace import discover, stream
from ..trace.events import Args, decode
from ..trace.link import Linked, link
from ..trace.read import file_size, is_url, read_trace_text
from ..format.version import ENGINE_VERSION, SCHEMA_VERSION
from . import finite
from . import gpu_window
from .verdicts import verdicts

Progress = Callable[[str, float], None]
UNFUSED = {"eager", "math", "compiled", "mha_fastpath", "sdpa"}
MAX_SAMPLES = 64
MAX_SAMPLE_EVENTS = 400
MAX_KERNEL_ROWS = 2000
MAX_OP_ROWS = 500
MAX_LAYER_KERNELS = 100
MAX_CALL_TIMES = 10000  # call_us: each call's time, for compare's noise test where a run has one step
MAX_LAYERS = 1000  # a trace without module scopes can name thousands of layers; keep the report compact


def analyze_file(path: str, progress: Progress | None = None, keep: dict | None = None,
                 snapshots: list[str] | None = None) -> dict[str, Any]:
    """Analyse one trace file (local path or fsspec URL). Raises TraceError on unusable input.
    ``keep``, when given, receives the linked trace and the calls (``tb-attn annotate`` reads them).
    ``snapshots``: the memory snapshots that join it; None finds them beside the trace (the plugin
    passes the ones its listing found, so that only files inside the logdir are ever read)."""
    say = progress or (lambda phase, frac: None)
    path = str(path)
    gc_was = gc.isenabled()
    gc.disable()  # millions of small objects, none cyclic: the collector would only rescan them
    try:
        t0 = time.perf_counter()
        say("reading", 0.0)
        # Streamed through the scanner when the file is plainly laid out (the whole text is never
        # held); else, or without the scanner, the whole text is read and judged the careful way.
        streamed = stream.decode_file(path, needs_shapes, lambda f: say("reading", 0.6 * f))
        if streamed is not None:
            (ev, size), gzip_cut = streamed, False
        else:
            text, warnings = read_trace_text(path)  # its only warnings are about a gzip stream cut short
            gzip_cut = bool(warnings)
            size = len(text)
            say("decoding", 0.15)
            ev = decode(path, text, warnings, keep_shapes=needs_shapes)
            del text
        say("linking", 0.6)
        L = link(ev)
        ev.op_table = ev.gpu_table = None  # read by link alone (kernel_reading reads the launches' correlation ids)
        say("finding attention", 0.75)
        calls, call_of = detect(L)
        say("measuring", 0.85)
        m = measure(L, calls, call_of)
        phase_of: dict[int, tuple[str, list[str]]] = {}  # each call's serving phase, found once for reading and overview
        report = _assemble(path, size, ev, L, calls, m, {}, call_of, phase_of)
        say("memory", 0.95)
        _add_memory(report, ev, L, calls, call_of, m, path, snapshots)
        _safety_net(report, L, call_of, m)
        gpu_window.add(report, L, calls, call_of, m)
        overview.add(report, L, ev, calls, m, phase_of)  # the steps' split, what limits them, serving phases
        reading.add(report, ev, L, calls, call_of, m)  # fingerprints, occupancy, why not flash
        if keep is not None:
            keep.update(L=L, calls=calls, call_of=call_of, measured=m, events=ev)
        report["trace"]["truncated"] = gzip_cut or ev.truncated
        report["analysis_seconds"] = round(time.perf_counter() - t0, 4)
        finite.scrub(report)
        say("done", 1.0)
        return report
    finally:
        if gc_was:
            gc.enable()


def _add_memory(report, ev, L, calls, call_of, m, path: str, snapshots: list[str] | None) -> None:
    """The memory section (profiler events, and a snapshot beside the trace); each layer's
    memory_bytes is its largest peak growth there."""
    report["memory"] = memory.from_trace(ev, L, calls, (m.slot, m.slot_keys), report["warnings"], m.member_at)
    if snapshots is not None:
        memory.join(report, path, snapshots)
    elif not is_url(path):
        memory.join(report, path)
    sec = report["memory"]
    if sec is not None:
        growth = {r["layer"]: r["peak_growth_bytes"] for r in sec["layers"] if r["allocs"]}
        for lay in report["layers"]:
            if lay["layer"] in growth:
                lay["memory_bytes"] = growth[lay["layer"]]


def _source(path: str, size: int) -> dict[str, Any]:
    name = os.path.basename(path.rstrip("/"))
    parsed = discover.parse_name(name)
    try:
        on_disk = file_size(path)
    except Exception:
        on_disk = None
    return {"path": path, "file": name, "worker": parsed[0] if parsed else name, "span": parsed[1] if parsed else "",
            "size_bytes": on_disk, "json_bytes": size}


def _name_calls(calls: list[Call]) -> None:
    ordinal: Counter = Counter()
    for c in sorted(calls, key=lambda c: (c.step, c.start)):
        if c.root < 0:  # kernels alone: no op in the window launched them
            graph = any(k.graph for k in c.kernels)
            c.layer = f"{c.implementation} kernels ({'graph replay' if graph else 'no launching op'})"
            c.layer_type = c.layer
            continue
        bwd_only = bool(c.info.get("backward_only"))
        if not c.layer:
            key = (c.step, c.implementation, bwd_only)
            k = ordinal[key]
            ordinal[key] += 1
            c.layer = f"{c.implementation}#{k}" + (" (backward only)" if bwd_only else "")
        if bwd_only and c.layer_type and not c.layer_type.endswith("(backward only)"):
            c.layer_type += " (backward only)"
        if not c.layer_type:
            tag = c.info.get("tag") or {}
            if tag.get("cls"):
                c.layer_type = str(tag["cls"])
            elif c.source == "tag":
                c.layer_type = layer_type_of_path(c.layer)
            else:
                c.layer_type = f"{c.implementation} attention"


def _stage_rows(cells: dict[tuple[str, str], Cell]) -> list[dict[str, Any]]:
    rows = []
    for st in tags.STAGES:
        for ps in PASSES:
            c = cells.get((st, ps))
            if c is not None:
                rows.append({"stage": st, "pass": ps, "gpu_us": round(c.gpu_us, 3), "cpu_us": round(c.cpu_us, 3),
                             "kernels": c.kernels, "launches": c.launches})
    return rows


def _shape_info(L: Linked, calls: list[Call]) -> None:
    """Fill shape/dtype/causal from the outermost attention op when tags or matmuls gave none."""
    # The ops that may carry a shape, found once by name; each call looks at those inside it.
    cand = L.where_name(_may_carry_shape)
    for c in calls:
        if "shape" in c.info and "causal" in c.info:
            continue
        k = bisect_left(cand, c.lo)
        while k < len(cand) and cand[k] < c.hi:
            name, a = L.names[cand[k]], L.args(cand[k])
            k += 1
            if a is None or (name not in shapes.SIGNATURES and not a.dims):
                continue  # a vendor op says nothing without its dims
            for key, v in _op_shape(name, bytes(a.dims_raw), bytes(a.types_raw), bytes(a.concrete_raw)):
                c.info.setdefault(key, dict(v) if isinstance(v, dict) else v)  # a call's own copy
            if "shape" in c.info:
                break


def _may_carry_shape(name: str) -> bool:
    return name in shapes.SIGNATURES or is_vendor_op(name)


@lru_cache(maxsize=4096)
def _op_shape(name: str, dims: bytes, types: bytes, concrete: bytes) -> tuple:
    """shapes.from_attention_op of one op's raw shapes, as items; decided once per distinct op: a
    layer's op carries the same shapes in every step."""
    a = Args(dims_raw=msgspec.Raw(dims), types_raw=msgspec.Raw(types), concrete_raw=msgspec.Raw(concrete))
    return tuple(shapes.from_attention_op(name, a.dims, a.types, a.concrete).items())


def _assemble(path, size, ev, L: Linked, calls: list[Call], m, mem, call_of=None,
              phase_of: dict[int, tuple[str, list[str]]] | None = None) -> dict[str, Any]:
    """``phase_of``, when given, is filled with each call's serving phase (overview/phases.py: read once
    the calls' shapes are known, here) for the reading to split by and the overview to report."""
    has_gpu = bool(L.kernels)
    # Runtime launches come from CUPTI/roctracer only: a GPU was there even when no kernel was kept.
    device = describe(ev.device_properties, has_gpu or len(ev.launch_table) > 0)
    basis = "gpu" if has_gpu else "cpu"
    _name_calls(calls)
    _shape_info(L, calls)
    child_shapes.fill(L, calls, m.stage_of)
    heads.name_heads(L, calls)

    # Per call totals, then per layer.
    layers: dict[str, dict[str, Any]] = {}
    run_cells: dict[tuple[str, str], Cell] = {}
    step_att_gpu: Counter = Counter()
    step_att_cpu: Counter = Counter()
    step_calls: Counter = Counter()
    impl_counts: Counter = Counter()
    call_us: list[float] = []
    # Calls with kernel launches whose kernels the trace lacks (a cut window): their FLOPs stay out
    # of their layer's, so TFLOP/s is that of the calls whose time was recorded.
    lost = L.unrecorded
    lost_calls = {call_of[op] for op in lost.ops if op >= 0} if lost is not None and call_of is not None else set()
    for c in calls:
        cells = m.cells[c.id]
        gpu = sum(x.gpu_us for x in cells.values())
        cpu = sum(x.cpu_us for x in cells.values())
        step_att_gpu[c.step] += gpu
        step_att_cpu[c.step] += cpu
        step_calls[c.step] += 1
        if len(call_us) < MAX_CALL_TIMES:
            call_us.append(round(gpu if has_gpu else cpu, 3))
        impl_counts[(c.layer_type, c.implementation)] += 1
        has_bwd = any(ps == "bwd" and (x.gpu_us or x.cpu_us) for (st, ps), x in cells.items())
        f = shapes.flops(c.info.get("shape"), c.info.get("causal"))
        # backward = 2.5x forward (five matmuls, causal alike); a backward-only call has no forward
        call_flops = (f * (2.5 if c.info.get("backward_only") else 3.5 if has_bwd else 1.0)) if f else None
        lay = layers.get(c.layer)
        if lay is None:
            lay = layers[c.layer] = {
                "layer": c.layer, "layer_type": c.layer_type, "calls": 0, "impls": Counter(), "backend": c.backend,
                "compiled": False, "source": c.source, "cells": {}, "shape": c.info.get("shape"),
                "dtype": c.info.get("dtype"), "causal": c.info.get("causal"), "dropout": c.info.get("dropout"),
                "mask": c.info.get("mask"), "flops": 0.0, "has_flops": False, "score_bytes": None,
                "memory_bytes": None, "first_call": c.id, "kernel_acc": {},
            }
            if "heads" in c.info:
                lay["heads"] = c.info["heads"]
        lay["calls"] += 1
        lay["impls"][c.implementation] += 1
        lay["compiled"] = lay["compiled"] or c.compiled
        if call_flops and c.id not in lost_calls:
            lay["flops"] += call_flops
            lay["has_flops"] = True
        for key, x in cells.items():
            lay["cells"].setdefault(key, Cell()).add(x)
            run_cells.setdefault(key, Cell()).add(x)
        acc = lay["kernel_acc"]
        for key, (n, us) in m.call_kernels[c.id].items():
            row = acc.get(key)
            if row is None:
                acc[key] = [n, us]
            else:
                row[0] += n
                row[1] += us
        if c.implementation in UNFUSED:
            sb = shapes.score_bytes(c.info.get("shape"), c.info.get("dtype"))
            if sb is not None:
                lay["score_bytes"] = max(lay["score_bytes"] or 0, sb)

    layer_rows = []
    for lay in layers.values():
        cells = lay.pop("cells")
        impls = lay.pop("impls")
        has_flops = lay.pop("has_flops")
        kacc = lay.pop("kernel_acc")
        lay["kernels"] = [{"name": k[0], "stage": k[1], "pass": k[2], "count": int(v[0]), "gpu_us": round(v[1], 3)}
                          for k, v in sorted(kacc.items(), key=lambda kv: -kv[1][1])[:MAX_LAYER_KERNELS]]
        lay["implementation"] = "+".join(k for k, _ in impls.most_common())
        lay["gpu_us"] = round(sum(x.gpu_us for x in cells.values()), 3)
        lay["cpu_us"] = round(sum(x.cpu_us for x in cells.values()), 3)
        lay["stages"] = _stage_rows(cells)
        core = sum((x.gpu_us if has_gpu else x.cpu_us) for (st, _), x in cells.items() if st in tags.CORE_STAGES)
        lay["flops"] = lay["flops"] if has_flops else None
        lay["tflops"] = units.sig(units.per_second(lay["flops"], core, 1e12)) if has_flops else None
        layer_rows.append(lay)
    layer_rows.sort(key=lambda r: -(r["gpu_us"] if has_gpu else r["cpu_us"]))

    att_gpu = sum(x.gpu_us for x in run_cells.values())
    att_cpu = sum(x.cpu_us for x in run_cells.values())
    total = m.total_gpu_us if has_gpu else m.total_cpu_us
    share = (att_gpu if has_gpu else att_cpu) / total if total > 0 else 0.0

    kernels = [{"name": k[0], "stage": k[1], "pass": k[2], "implementation": k[3], "count": int(v[0]),
                "gpu_us": round(v[1], 3)} for k, v in m.kernel_rows.items()]
    kernels.sort(key=lambda r: -r["gpu_us"])
    ops = [{"name": k[0], "stage": k[1], "pass": k[2], "count": int(v[0]), "cpu_us": round(v[1], 3)}
           for k, v in m.op_rows.items()]
    ops.sort(key=lambda r: -r["cpu_us"])

    step_ids = sorted(set(L.steps) | {s for s in m.step_gpu if s >= 0})
    steps = [{"step": s, "gpu_us": round(m.step_gpu.get(s, 0.0), 3), "cpu_us": round(m.step_cpu.get(s, 0.0), 3),
              "attention_gpu_us": round(step_att_gpu.get(s, 0.0), 3),
              "attention_cpu_us": round(step_att_cpu.get(s, 0.0), 3), "calls": step_calls.get(s, 0)}
             for s in step_ids]

    metadata = ev.tb_attn if isinstance(ev.tb_attn, dict) else {}
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "engine_version": ENGINE_VERSION,
        "source": _source(path, size),
        "device": device,
        "metadata": metadata,
        "distributed": {k: ev.distributed[k] for k in ("rank", "world_size", "backend") if k in ev.distributed},
        "time_basis": basis,
        "total_gpu_us": round(m.total_gpu_us, 3),
        "total_cpu_us": round(m.total_cpu_us, 3),
        "attention_gpu_us": round(att_gpu, 3),
        "attention_cpu_us": round(att_cpu, 3),
        "attention_share": round(share, 6),
        "calls": len(calls),
        "steps": steps,
        "call_us": call_us,
        "stages": _stage_rows(run_cells),
        "layers": layer_rows[:MAX_LAYERS],
        "layers_omitted": max(0, len(layer_rows) - MAX_LAYERS),
        "implementations": [{"layer_type": lt, "implementation": im, "calls": n}
                            for (lt, im), n in sorted(impl_counts.items(), key=lambda kv: -kv[1])],
        "kernels": kernels[:MAX_KERNEL_ROWS],
        "ops": ops[:MAX_OP_ROWS],
        "call_samples": _samples(L, calls, layers, m),
        "trace": {"events": ev.total_events, "kernels": len(L.kernels), "ops": len(L.names),
                  "unlinked_kernels": L.unlinked_kernels, "graph_kernels": L.graph_kernels,
                  "backward_links": len(L.fwd_of)},
        "warnings": list(ev.warnings) + _backward_only_warning(calls) + _from_kernels_warning(calls),
    }
    if call_of is not None:
        report["roofline"] = build_roofline(L, calls, call_of, m, device, metadata, has_gpu)
        if phase_of is not None:
            phase_of.update(phases.phase_of_calls(L, calls, m))
        report["reading"] = reading.build(L, calls, call_of, m.stage_of, ev, has_gpu,
                                          {k: v[0] for k, v in (phase_of or {}).items()})
    report["verdicts"] = verdicts(report)
    return report


def _from_kernels_warning(calls: list[Call]) -> list[str]:
    n = sum(1 for c in calls if c.info.get("from_kernels"))
    if not n:
        return []
    return [f"{n} attention call{'s were' if n > 1 else ' was'} found from kernels only (no CPU op launched them: "
            "batched GEMM, softmax, batched GEMM on one stream), with lower confidence than calls found from ops: "
            "no layer names or shapes; record CPU activity with record_shapes=True for those"]


def _backward_only_warning(calls: list[Call]) -> list[str]:
    n = sum(1 for c in calls if c.info.get("backward_only"))
    if not n:
        return []
    return [f"{n} attention call{'s are' if n > 1 else ' is'} backward only: the forward ran before the profiled "
            "window (or autograd links it to no attention call), so forward time, shapes and FLOPs are missing for them"]


def _samples(L: Linked, calls: list[Call], layers: dict[str, dict], m) -> list[dict[str, Any]]:
    """Events of sampled calls, for the one-call timeline (times relative to the call's start): the
    first call of each layer, then the first of each layer in every later step, then the rest in
    trace order, up to MAX_SAMPLES, so every layer and every step can be picked."""
    out = []
    wanted = set(_sample_ids(calls, layers))
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
                times += (L.ts[j] - t0, L.dur[j])
                for k in by_op_kernels.get(j, ()):
                    events.append({"name": k.name, "kind": "kernel", "stage": kernel_stage(st, k.name), "pass": ps,
                                   "start_us": None, "dur_us": None, "depth": 0, "stream": stream(k)})
                    times += (k.ts - t0, k.dur)
        for k in c.kernels:
            fam = kernel_table.helper_family(k.name)
            events.append({"name": k.name, "kind": "kernel", "stage": fam.stage if fam else "fused",
                           "pass": (fam.pass_ or "fwd") if fam else "fwd", "start_us": None, "dur_us": None,
                           "depth": 0, "stream": stream(k)})
            times += (k.ts - t0, k.dur)
        times = columns.rounded(times)  # round(x, 3) of each, at C speed
        for ev, a, b in zip(events, times[0::2], times[1::2]):
            ev["start_us"], ev["dur_us"] = a, b
        end = max((ev["start_us"] + ev["dur_us"] for ev in events), default=0.0)
        out.append({"id": c.id, "layer": c.layer, "step": c.step, "implementation": c.implementation,
                    "start_us": round(t0, 3), "dur_us": round(end, 3), "truncated": len(events) > MAX_SAMPLE_EVENTS,
                    "events": events[:MAX_SAMPLE_EVENTS]})
    return out


def _sample_ids(calls: list[Call], layers: dict[str, dict]) -> list[int]:
    ids = [lay["first_call"] for lay in layers.values()]
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


def _safety_net(report: dict[str, Any], L: Linked, call_of: list[int], m) -> None:
    """Attention-looking kernels that nothing explains (attention/safety.py), and the table used."""
    outside = safety.outside_calls(L, call_of, m.kernel_call)
    rows = safety.unknown_kernels(L, call_of, m.kernel_call, m.total_gpu_us, outside)
    report["unknown_kernels"] = rows
    report["unjoined_kernels"] = safety.unjoined_kernels(outside, m.total_gpu_us)
    # Attention time as the calls' cells hold it (unrounded), so the four parts add up to the total.
    att_gpu = sum(x.gpu_us for cells in m.cells for x in cells.values())
    report["gpu_accounting"] = safety.accounting(outside, att_gpu, m.total_gpu_us) if L.kernels else None
    for line in (safety.warning_line(rows), safety.unjoined_warning(report["unjoined_kernels"]),
                 safety.unclaimed_score_paths(L, call_of, m.kernel_call)):
        if line:
            report["warnings"].append(line)
    from ..attention.user_table import installed_files

    report["kernel_table"] = {"families": len(kernel_table.effective_families()),
                              "user_families": len(kernel_table.user_families()),
                              "user_sources": [os.path.basename(f) for f in installed_files()]}


def analyze_path(path: str, progress_for: Callable[[discover.TraceFile], Progress] | None = None, loose: bool = True):
    """Yield (TraceFile, report or TraceError) for a file, a run directory or a logdir.
    ``progress_for(trace_file)`` gives each file its own progress callback."""
    from ..format.errors import TraceError

    from ..trace.url_logdir import is_url_logdir, url_logdir

    if os.path.isdir(path):
        files = discover.find_traces(path, loose=loose)
        if not files:
            raise TraceError(path, "no trace files (*.pt.trace.json[.gz] or *.json[.gz]) under this directory")
    elif is_url_logdir(path):
        files = url_logdir(path)  # s3://bucket/job/: listed as a local logdir is, each rank's URL read in turn
    else:
        name = os.path.basename(path)
        parsed = discover.parse_name(name) or (name, "")
        files = [discover.TraceFile(path, ".", parsed[0], parsed[1])]
    for tf in files:
        try:
            yield tf, analyze_file(tf.path, progress_for(tf) if progress_for else None)
        except TraceError as exc:
            yield tf, exc
        except MemoryError:  # what was allocated is freed as the frames unwind: the next file still runs
            yield tf, TraceError(tf.path, "not enough memory to analyse this trace (set TB_ATTN_MAX_TRACE_BYTES "
                                          "lower to refuse such files before reading them)")
