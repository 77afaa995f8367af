"""The report's sections, one row each, in the report's order: its key, how it is built from the Analysis, its text.

A new section is a builder in its room, its Struct in format/report/ and one row here. ``build`` returns
the section's value (``report[name]``); a section that writes several of the report's keys returns them
as a dict and names them in ``keys``. Sections run in this order, and a builder may read (and mark) the
sections above it through ``a.report``. ``lines`` is the section's text for the terminal, where it has its
own (report/text.py lays them out).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple

from ..attention import safety
from ..format.version import ENGINE_VERSION, SCHEMA_VERSION
from ..memory import engine as memory
from ..overview import section as overview
from ..reading import section as reading
from ..roofline.section import build as build_roofline
from . import gpu_window, layers, run
from .analysis import Analysis
from .samples import samples
from .verdicts import verdicts


class Section(NamedTuple):
    name: str
    build: Callable[[Analysis], Any]
    lines: str | None = None  # "module:function" under tb_attn_plugin: function(report) -> its text lines
    keys: tuple[str, ...] = ()  # the report keys it writes, in order, when it writes more than ``name``

    def text(self) -> Callable[[dict[str, Any]], list[str]] | None:
        """The section's text function, imported when asked for: analysing a trace renders no text."""
        if self.lines is None:
            return None
        module, function = self.lines.split(":")
        return getattr(importlib.import_module(f"tb_attn_plugin.{module}"), function)


def _distributed(a: Analysis) -> dict[str, Any]:
    return {k: a.ev.distributed[k] for k in ("rank", "world_size", "backend") if k in a.ev.distributed}


def _samples(a: Analysis) -> list[dict[str, Any]]:
    return samples(a.L, a.calls, [lay.first_call for lay in a.totals.by_layer.values()], a.m)


def _memory(a: Analysis) -> dict[str, Any] | None:
    return memory.report_section(a.ev, a.L, a.calls, a.m, a.warnings, a.path, a.snapshots, a.report["layers"])


SECTIONS: tuple[Section, ...] = (
    Section("schema_version", lambda a: SCHEMA_VERSION),
    Section("engine_version", lambda a: ENGINE_VERSION),
    Section("source", lambda a: run.source(a.path, a.size)),
    Section("device", lambda a: a.device),
    Section("metadata", lambda a: a.metadata),
    Section("distributed", _distributed),
    Section("time_basis", lambda a: "gpu" if a.has_gpu else "cpu"),
    Section("totals", lambda a: run.totals(a.totals, a.m, a.calls, a.has_gpu),
            keys=("total_gpu_us", "total_cpu_us", "attention_gpu_us", "attention_cpu_us", "attention_share", "calls")),
    Section("steps", lambda a: run.steps(a.totals, a.m, a.L)),
    Section("call_us", lambda a: a.totals.call_us),
    Section("stages", lambda a: layers.stage_rows(a.totals.run_cells)),
    Section("layers", lambda a: layers.layer_rows(a.totals)),
    Section("layers_omitted", lambda a: layers.omitted(a.totals)),
    Section("implementations", lambda a: run.implementations(a.totals)),
    Section("kernels", lambda a: run.kernels(a.m)),
    Section("ops", lambda a: run.ops(a.m)),
    Section("call_samples", _samples),
    Section("trace", lambda a: run.trace_counts(a.ev, a.L)),
    Section("warnings", lambda a: a.warnings),
    Section("roofline", lambda a: build_roofline(a.L, a.calls, a.call_of, a.m, a.device, a.metadata, a.has_gpu),
            "roofline.text:roofline_lines"),
    Section("reading", lambda a: reading.build(a.L, a.calls, a.call_of, a.m.stage_of, a.ev, a.has_gpu,
                                                      {k: v[0] for k, v in a.phase_of.items()}),
            "report.text:reading_lines"),
    Section("verdicts", lambda a: verdicts(a.report)),
    Section("memory", _memory, "memory.text:lines"),
    Section("safety_net", lambda a: safety.section(a.L, a.call_of, a.m, a.warnings),
            keys=("unknown_kernels", "unjoined_kernels", "gpu_accounting", "kernel_table")),
    Section("gpu_window", lambda a: gpu_window.build(a.report, a.L, a.calls, a.call_of, a.m),
            keys=("before_window", "gpu_window")),
    Section("overview", lambda a: overview.build(a.report, a.L, a.ev, a.calls, a.m, a.phase_of), "overview.text:lines"),
    Section("kernel_reading", lambda a: reading.kernel_reading(a.report, a.ev, a.L, a.calls, a.call_of, a.m),
            "reading.text:lines"),
)


def assemble(a: Analysis) -> dict[str, Any]:
    """The report: every section built in order into ``a.report``."""
    report = a.report
    for s in SECTIONS:
        value = s.build(a)
        if s.keys:
            report.update(value)
        else:
            report[s.name] = value
    return report
