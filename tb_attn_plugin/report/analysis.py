"""What every report section reads: the trace's events, the linked table, the calls, the measures, the device."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..attention.detect import Call
from ..attention.metrics import Measured
from ..overview import phases
from ..trace.events import Events
from ..trace.link import Linked
from .layers import Totals


@dataclass(eq=False)
class Analysis:
    """One trace, read, linked, its attention found and measured; the sections (report/sections.py) are
    built from it in order, each into ``report``, which the later ones may read (and mark: gpu_window
    marks the layers that lost kernels, kernel_reading adds each layer's occupancy)."""
    path: str
    size: int  # the JSON text's bytes
    ev: Events
    L: Linked
    calls: list[Call]
    call_of: list[int]  # op -> its call's id, -1: none
    m: Measured
    totals: Totals  # the layers and the run's totals, from one walk over the calls
    device: dict[str, Any] | None
    has_gpu: bool  # kernels were recorded: times are GPU times
    metadata: dict[str, Any]  # the collector's run metadata
    warnings: list[str]  # the report's warnings: each section adds its own
    snapshots: list[str] | None  # memory snapshots that join the trace; None: found beside it
    report: dict[str, Any] = field(default_factory=dict)  # the sections written so far

    @cached_property
    def phase_of(self) -> dict[int, tuple[str, list[str]]]:
        """Each call's serving phase and its evidence (overview/phases.py), found once for the reading
        to split by and the overview to report (the calls' shapes are known by now)."""
        return phases.phase_of_calls(self.L, self.calls, self.m)
