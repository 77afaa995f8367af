"""The report's two documents, ``Report`` and ``SnapshotReport``, from the sections' Structs (see the package's docstring)."""


from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from .base import TS_ALIASES, TS_CONSTANTS, Basis, Count, Row, doc
from .layers import Layer
from .memory import MemorySection
from .overview import Overview
from .reading import KernelReading, ReadingRow
from .roofline import Roofline
from .layers import StageRow
from .rows import (BeforeWindow, CallSample, Device, GpuAccounting, GpuWindow, Implementation, Kernel, KernelTable, Op, Source,
                   Step, TraceCounts, UnjoinedKernel, UnknownKernel, Verdict)

__all__ = ["Report", "SnapshotReport", "MemorySection", "TS_ALIASES", "TS_CONSTANTS", "UNSET"]


class Report(Row, kw_only=True):
    """One trace file analysed by tb_attn_plugin.report.build.analyze_file. Times in microseconds."""
    schema_version: Literal[2]
    engine_version: str
    source: Source
    device: Device | None
    metadata: Annotated[dict[str, Any], doc("run metadata written by the collector (tags.METADATA_KEY)")]
    distributed: Annotated[dict[str, Any], doc(
        "rank, world_size, backend as the trace's distributedInfo says (untrusted JSON)")]
    time_basis: Basis
    total_gpu_us: float
    total_cpu_us: float
    attention_gpu_us: float
    attention_cpu_us: float
    attention_share: Annotated[float, Meta(ge=0, le=1)]
    calls: Count
    steps: list[Step]
    call_us: Annotated[list[float], doc("each attention call's time on the report's time basis, in the order the "
                                        "engine found them (the first 10000): compare's noise test where a run has "
                                        "too few steps")] | UnsetType = UNSET
    stages: list[StageRow]
    layers: list[Layer]
    layers_omitted: Annotated[int, Meta(ge=0), doc("layers left out of `layers` (the smallest by time) to keep "
                                                  "the report compact")]
    implementations: list[Implementation]
    kernels: list[Kernel]
    ops: list[Op]
    call_samples: list[CallSample]
    trace: TraceCounts
    warnings: list[str]
    roofline: Roofline
    reading: Annotated[list[ReadingRow], doc("one row per layer type × implementation, most calls first "
                                            "(docs/api.md)")]
    verdicts: list[Verdict]
    memory: Annotated[MemorySection | None, doc(
        "null when the trace has no [memory] events and no snapshot joins it (record with profile_memory=True "
        "or tb_attn_plugin.profile(memory=True))")]
    unknown_kernels: Annotated[list[UnknownKernel], doc(
        "The safety net: kernels whose names look like attention (attn, attention, fmha, flash, sdpa, paged, "
        "sage, mla, ...) but that match no attention family of the kernel table and belong to no attention "
        "call; at most 50, by GPU time.")]
    unjoined_kernels: Annotated[list[UnjoinedKernel], doc(
        "Known attention sub-stage kernels (HELPER_STAGES of attention/patterns.py) that joined no attention "
        "call: their time is in no call's and is reported here, largest first, at most 50.")]
    gpu_accounting: Annotated[GpuAccounting | None, doc("null without GPU kernels")]
    kernel_table: KernelTable
    gpu_window: Annotated[GpuWindow | None, doc(
        "null when every kernel launch has its kernel (launches inside a stream capture run nothing and are "
        "not counted)")]
    before_window: Annotated[BeforeWindow | None, doc(
        "GPU activity launched before the profiling window, listed apart from its calls; null when there is "
        "none, or the trace cannot say (no runtime calls, or launches of the window missing too)")] | UnsetType = UNSET
    kernel_reading: KernelReading
    overview: Annotated[Overview, doc("attention in its step: the steps' GPU split, what limits them, serving phases")]
    analysis_seconds: Annotated[float, doc("wall time of the analysis, s")]


class SnapshotSource(Row, kw_only=True):
    """The snapshot file read."""
    path: str
    file: str


class SnapshotReport(Row, kw_only=True):
    """``tb-attn report FILE.pickle`` (memory/engine.py snapshot_report): a report holding only a CUDA memory
    snapshot's memory section."""
    schema_version: Literal[2]
    engine_version: str
    kind: Literal["memory_snapshot"]
    source: SnapshotSource
    memory: MemorySection
    warnings: list[str]
    analysis_seconds: Annotated[float, doc("wall time of the analysis, s")]
