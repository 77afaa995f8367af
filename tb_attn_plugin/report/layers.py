"""The report's layers: each call's time, FLOPs and kernels added up per layer, and the run's totals of the same walk."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, cast

import msgspec
from msgspec import UNSET

from ..attention import shapes
from ..attention.detect import Call
from ..attention.metrics import PASSES, Cell, Measured
from ..format import tags
from ..format.report.base import Pass, Stage
from ..format.report.layers import Layer, LayerKernel, Shape, StageRow
from ..text import units
from ..trace.link import Linked

UNFUSED = {"eager", "math", "compiled", "mha_fastpath", "sdpa"}
MAX_LAYER_KERNELS = 100
MAX_CALL_TIMES = 10000  # call_us: each call's time, for compare's noise test where a run has one step
MAX_LAYERS = 1000  # a trace without module scopes can name thousands of layers; keep the report compact


class Totals:
    """One walk over the calls: the layer rows (every layer, largest first; the report keeps MAX_LAYERS),
    and what the run-wide sections read of the same walk."""

    def __init__(self) -> None:
        self.by_layer: dict[str, Layer] = {}  # in the order the calls first name them
        self.rows: list[Layer] = []
        self.run_cells: dict[tuple[str, str], Cell] = {}
        self.step_att_gpu: defaultdict[int, float] = defaultdict(float)
        self.step_att_cpu: defaultdict[int, float] = defaultdict(float)
        self.step_calls: Counter = Counter()
        self.impl_counts: Counter = Counter()
        self.call_us: list[float] = []


def totals(L: Linked, calls: list[Call], call_of: list[int], m: Measured, has_gpu: bool) -> Totals:
    """Per call totals, then per layer."""
    t = Totals()
    layers: dict[str, dict[str, Any]] = {}  # each layer's sums as the walk adds them up; its Layer is made last
    run_cells, call_us = t.run_cells, t.call_us
    # Calls with kernel launches whose kernels the trace lacks (a cut window): their FLOPs stay out
    # of their layer's, so TFLOP/s is that of the calls whose time was recorded.
    lost = L.unrecorded
    lost_calls = {call_of[op] for op in lost.ops if op >= 0} if lost is not None else set()
    for c in calls:
        cells = m.cells[c.id]
        gpu = sum(x.gpu_us for x in cells.values())
        cpu = sum(x.cpu_us for x in cells.values())
        t.step_att_gpu[c.step] += gpu
        t.step_att_cpu[c.step] += cpu
        t.step_calls[c.step] += 1
        if len(call_us) < MAX_CALL_TIMES:
            call_us.append(round(gpu if has_gpu else cpu, 3))
        t.impl_counts[(c.layer_type, c.implementation)] += 1
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
        for kkey, (n, us) in m.call_kernels[c.id].items():
            row = acc.get(kkey)
            if row is None:
                acc[kkey] = [n, us]
            else:
                row[0] += n
                row[1] += us
        if c.implementation in UNFUSED:
            sb = shapes.score_bytes(c.info.get("shape"), c.info.get("dtype"))
            if sb is not None:
                lay["score_bytes"] = max(lay["score_bytes"] or 0, sb)

    for lay in layers.values():
        cells = lay["cells"]
        has_flops = lay["has_flops"]
        core = sum((x.gpu_us if has_gpu else x.cpu_us) for (st, _), x in cells.items() if st in tags.CORE_STAGES)
        shape = lay["shape"]
        # kernel_reading and the sections after it set occupancy and why_not_flash (memory_bytes, gpu_unrecorded_calls)
        row = Layer(
            layer=lay["layer"], layer_type=lay["layer_type"], calls=lay["calls"], backend=lay["backend"],
            compiled=lay["compiled"], source=lay["source"], shape=Shape(**shape) if shape is not None else None,
            dtype=lay["dtype"], causal=lay["causal"], dropout=lay["dropout"], mask=lay["mask"],
            flops=lay["flops"] if has_flops else None, score_bytes=lay["score_bytes"], memory_bytes=None,
            first_call=lay["first_call"], heads=lay.get("heads", UNSET),
            kernels=[LayerKernel(name=k[0], stage=k[1], pass_=k[2], count=int(v[0]), gpu_us=round(v[1], 3))
                     for k, v in sorted(lay["kernel_acc"].items(), key=lambda kv: -kv[1][1])[:MAX_LAYER_KERNELS]],
            implementation="+".join(k for k, _ in lay["impls"].most_common()),
            gpu_us=round(sum(x.gpu_us for x in cells.values()), 3),
            cpu_us=round(sum(x.cpu_us for x in cells.values()), 3), stages=layer_stage_rows(cells),
            tflops=units.sig(units.per_second(lay["flops"], core, 1e12)) if has_flops else None,
            occupancy=[], why_not_flash=None, why_not_flash_unknown=None)
        t.by_layer[row.layer] = row
        t.rows.append(row)
    t.rows.sort(key=lambda r: -(r.gpu_us if has_gpu else r.cpu_us))
    return t


def _in_order(cells: dict[tuple[str, str], Cell]) -> list[tuple[str, str, Cell]]:
    """The cells that ran, in the tag format's stage order, fwd before bwd."""
    return [(st, ps, c) for st in tags.STAGES for ps in PASSES if (c := cells.get((st, ps))) is not None]


def stage_rows(cells: dict[tuple[str, str], Cell]) -> list[dict[str, Any]]:
    """The report's run-wide ``stages`` (plain rows, as every reader of the report's stages takes them)."""
    return [{"stage": st, "pass": ps, "gpu_us": round(c.gpu_us, 3), "cpu_us": round(c.cpu_us, 3),
             "kernels": c.kernels, "launches": c.launches} for st, ps, c in _in_order(cells)]


def layer_stage_rows(cells: dict[tuple[str, str], Cell]) -> list[StageRow]:
    """A Layer's ``stages``: the same rows as its Struct takes them."""
    return [StageRow(stage=cast(Stage, st), pass_=cast(Pass, ps), gpu_us=round(c.gpu_us, 3),
                     cpu_us=round(c.cpu_us, 3), kernels=c.kernels, launches=c.launches)
            for st, ps, c in _in_order(cells)]


def layer_rows(t: Totals) -> list[Layer]:
    """The report's ``layers``: the largest MAX_LAYERS."""
    return t.rows[:MAX_LAYERS]


def omitted(t: Totals) -> int:
    return max(0, len(t.rows) - MAX_LAYERS)


class _Typed(msgspec.Struct):
    """The parts of a report held as Structs in-process (its errors name the field: $.layers[i].x)."""
    layers: list[Layer] | None = None


def decode_report(body: bytes) -> dict[str, Any]:
    """A report's JSON as the engine holds it in-process: its layers as Layer Structs. Raises
    msgspec.DecodeError (ValidationError among them) for bytes that are not such a report."""
    r = msgspec.json.decode(body)
    typed = msgspec.convert(r, _Typed)
    if typed.layers is not None:
        r["layers"] = typed.layers
    return r
