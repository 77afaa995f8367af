"""The report's ``overview`` (tb_attn_plugin/overview/): attention in its step and in serving phases."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .base import Count, NonNeg, Pass, Row, Stage, doc

Part = Literal["attention_fwd", "attention_bwd", "other_matmul", "other_compute", "communication", "memcpy",
               "memset", "idle", "not_recorded"]


class StepPart(Row, kw_only=True):
    """One part of a step's GPU span: the time its activities add to the union of the parts before it
    (overview.precedence), so the parts sum to the span."""
    part: Annotated[Part, doc("not_recorded: span - busy of a step whose kernel launches lost their kernels "
                              "(GPU window cut): not known to be idle")]
    us: NonNeg
    share: Annotated[float | None, doc("of the GPU span; null when the span is 0")]


class MemcpyDirection(Row, kw_only=True):
    """Copies of one direction (HtoD, DtoH, DtoD, PtoP, other), their own union."""
    direction: str
    us: NonNeg
    count: Count


class StreamBusy(Row, kw_only=True):
    """The union of one stream's activities in the step."""
    stream: int | None
    busy_us: NonNeg
    activities: Count


class StepBreakdown(Row, kw_only=True):
    """One profiler step (or the whole trace without step markers, or the steps' sum as ``total``).
    GPU figures are null where the step ran nothing on the GPU (unknown, not 0); idle is null where
    launches lost kernels."""
    step: Annotated[int | None, doc("the ProfilerStep number; null: the whole trace, or the sum of steps")]
    label: str
    gpu_start_us: Annotated[float | None, doc("first activity's start, trace clock, µs")] | UnsetType = UNSET
    gpu_span_us: Annotated[float | None, doc("first activity's start to last one's end (summed over steps in total)")]
    busy_us: Annotated[float | None, doc("union of kernel, memcpy and memset intervals across streams")]
    parts: list[StepPart]
    idle_us: Annotated[float | None, doc("span - busy")]
    idle_host_us: Annotated[float | None, doc(
        "idle neither under a synchronising call nor after the next activity's launch had returned: waiting on the host")]
    idle_sync_us: Annotated[float | None, doc("idle while the host sat in cuda/hip Device/Stream/EventSynchronize")]
    idle_kernel_us: Annotated[float | None, doc(
        "kernel wait (HTA): idle, not under a sync, after the launch of the activity ending the gap had returned "
        "(the host had issued it); idle = host + sync + kernel; null where no activity of the step has a launch "
        "in the trace (then host = idle - sync)")] | UnsetType = UNSET
    communication_us: Annotated[float | None, doc("union of NCCL/RCCL/custom all-reduce kernels")]
    communication_exposed_us: Annotated[float | None, doc("communication not under any compute kernel")]
    communication_hidden_us: Annotated[float | None, doc("communication under compute")]
    memcpy_us: Annotated[float | None, doc("union of memcpy intervals (its own, before precedence)")]
    memcpy_by_direction: list[MemcpyDirection]
    memset_us: float | None
    activities: Annotated[Count, doc("kernels, memcpys and memsets of the step")]
    streams: list[StreamBusy] | UnsetType = UNSET
    unrecorded_launches: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    host_us: Annotated[float | None, doc("the ProfilerStep's duration on the host (whole trace: first op to last)")]
    data_loading_us: Annotated[float, doc("union of enumerate(DataLoader)# ops in the step, host")]
    optimizer_us: Annotated[float, doc("union of Optimizer.step# ops in the step, host")]
    gpu_end_after_host_us: Annotated[float | None, doc(
        "last GPU activity's end minus the host step's end: > 0 the GPU still works when the host moves on")] | UnsetType = UNSET
    steps: Annotated[int, doc("steps summed (total only)")] | UnsetType = UNSET


class Spread(Row, kw_only=True):
    """One figure (or part) across steps."""
    figure: str
    min_us: float
    median_us: float
    max_us: float


class Limit(Row, kw_only=True):
    """What limits the step: the largest part of the GPU span over all steps, in one sentence."""
    kind: Literal["host", "synchronisation", "communication", "attention", "matmul", "other_compute", "memcpy",
                  "memset", "unknown"]
    part: str | None
    share: Annotated[float | None, doc("of the GPU span")]
    us: float | None
    sentence: str


class PhaseStage(Row, kw_only=True):
    """The time of one attention stage and pass over the calls of one phase."""
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    gpu_us: NonNeg
    cpu_us: NonNeg


class PhaseRoofline(Row, kw_only=True):
    """One roofline point for the calls of one phase whose shape was recorded (overview.phase_convention)."""
    calls: Annotated[Count, doc("the calls with a recorded shape, the point's calls")]
    flops: float
    bytes: Annotated[float, doc("decode: the KV cache read (at most, for a paged op that records its longest "
                                "sequence only); other phases: the stage model's bytes")]
    time_us: Annotated[float, doc("their attention time on the report's time basis, µs")]
    intensity: Annotated[float | None, doc("FLOP per byte")]
    achieved_tflops: float | None
    achieved_tbs: Annotated[float | None, doc("bytes / time, TB/s")]
    bound: Annotated[Literal["compute", "memory", "launch"] | None, doc("null: no roof for this device")]
    bound_reason: str
    bytes_are: Annotated[Literal["kv_cache_read", "kv_cache_read_at_most", "stage_model"], doc(
        "kv_cache_read_at_most: bytes, FLOPs and rates are upper bounds, the intensity exact")]


class PhaseRow(Row, kw_only=True):
    """Attention calls of one serving phase (overview/phase_rules.py)."""
    phase: Literal["prefill", "decode", "mixed", "unknown"]
    calls: Count
    gpu_us: float
    cpu_us: float
    evidence: Annotated[list[str], doc("an example of what said so")]
    stages: Annotated[list[PhaseStage], doc("the calls' time per stage and pass, largest first")] | UnsetType = UNSET
    roofline: PhaseRoofline | None | UnsetType = UNSET


class Overview(Row, kw_only=True):
    """Attention in its step: each step's GPU span split into parts, what limits the step, serving phases."""
    precedence: Annotated[list[str], doc("the parts in the order that takes each instant first")]
    steps: list[StepBreakdown]
    total: StepBreakdown | None
    spread: list[Spread]
    limit: Limit
    window_cut: Annotated[bool, doc("the GPU window was cut (gpu_window.cut)")]
    phases: list[PhaseRow]
    phase_convention: Annotated[str, doc("how each phase's roofline point counts FLOPs, bytes and time")] | UnsetType = UNSET
