"""The report's roofline section (roofline/section.py)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .base import Basis, CoreStage, Count, NonNeg, Pass, Precision, Row, Tflops, doc
from .layers import Shape


class Roof(Row, kw_only=True):
    """The roof the points are read against."""
    kind: Literal["datasheet", "measured"]
    device: str | None
    source: str | None
    method: str | UnsetType = UNSET
    measured_at: Annotated[str | None, doc("when it was measured, UTC ISO 8601; null: not recorded "
                                           "(a trace of an older collector)")] | UnsetType = UNSET
    runs: Annotated[int | None, doc("measurements taken, the best kept")] | UnsetType = UNSET
    note: Annotated[str, doc("what makes the measurement doubtful (the machine's load when it was taken)")] | UnsetType = UNSET
    remeasure: Annotated[str, doc("the command that measures this machine's roof afresh")] | UnsetType = UNSET
    override: Annotated[str, doc("the file (--roof / TB_ATTN_ROOF) that replaced the trace's stored roof")] | UnsetType = UNSET
    tflops: Tflops
    bandwidth_tbs: float | None


class Lengths(Row, kw_only=True):
    """[min, max] of the class's lengths, tokens."""
    q_len: list[int] | UnsetType = UNSET
    k_len: list[int] | UnsetType = UNSET


class PerCall(Row, kw_only=True):
    """One call's share of a point's amounts."""
    flops: float
    bytes: float
    time_us: float


class RooflinePoint(Row, kw_only=True):
    """Amounts and rates of a roofline point (a layer class, or one stage of it)."""
    flops: NonNeg
    bytes: Annotated[NonNeg, doc("modelled bytes moved")]
    time_us: float
    units: Annotated[Count, doc("kernels (CPU: ops)")]
    intensity: Annotated[float | None, doc("FLOP per byte")]
    achieved_tflops: Annotated[float | None, doc("TFLOP/s over time_us: the modelled stages' time (the core stages with a cost model), not the whole call's")]
    achieved_tbs: Annotated[float | None, doc("TB/s over time_us, as achieved_tflops")]
    precision: Precision | UnsetType = UNSET
    peak_tflops: float | None | UnsetType = UNSET
    bandwidth_tbs: float | None | UnsetType = UNSET
    attainable_tflops: float | None
    fraction: Annotated[float | None, doc("achieved / attainable")]
    bandwidth_fraction: Annotated[float | None, doc("achieved_tbs / bandwidth_tbs")] | UnsetType = UNSET
    mean_unit_us: float | None | UnsetType = UNSET
    above_roof: Annotated[bool, doc("achieved above the roof (FLOP rate over attainable or bandwidth over the "
                                    "roof's): the roof is wrong, not the kernel")] | UnsetType = UNSET
    bound: Literal["compute", "memory", "launch", None]
    bound_reason: str


class RooflineStage(RooflinePoint, kw_only=True):
    """One modelled stage and pass of a roofline point."""
    stage: CoreStage
    pass_: Pass = msgspec.field(name="pass")


class RooflineLayer(RooflinePoint, kw_only=True):
    """One layer type, implementation and length class."""
    layer_type: str
    implementation: str
    label: Annotated[str, doc("'Owlv2Attention (eager)', with ', L 5185×5185' when the layer type and "
                             "implementation have several length classes")]
    calls: int
    modelled_calls: int | UnsetType = UNSET
    dtype: str | None | UnsetType = UNSET
    shape: Shape | None | UnsetType = UNSET
    lengths: Annotated[Lengths | None, doc("the class's [min, max] of q_len and k_len; null when no call has a "
                                          "shape")] | UnsetType = UNSET
    lengths_text: Annotated[str | None, doc("'L 5185×5185' or 'Lq 1, Lk 1024–2047'; null unless the layer type "
                                           "and implementation have other length classes")] | UnsetType = UNSET
    score_bytes: int | None
    unmodelled_stages: list[str]
    stages: list[RooflineStage]
    dominant_stage: str | None
    per_call: PerCall
    line: str


class PartsUs(Row, kw_only=True):
    """A run's wall time split into parts that sum to it, µs."""
    memory: float
    compute: float
    launch: float
    cpu: float
    rest: float


class Timing(Row, kw_only=True):
    """A run's time split on one basis (docs/api.md)."""
    wall_us: NonNeg
    busy_us: NonNeg
    idle_us: NonNeg
    units: Annotated[int, doc("kernels (CPU: ops) of the modelled stages")]
    gaps: Annotated[int, doc("GPU: gaps between a call's kernels; CPU: the ops, each paying a dispatch")]
    launch_gap_us: Annotated[float, doc("GPU only: the median gap between a call's kernels")] | UnsetType = UNSET
    dispatch_us: Annotated[float, doc("CPU only: the median view op's self time")] | UnsetType = UNSET
    modelled_us: Annotated[float, doc("time of the stages the roofline models")]
    bytes: Annotated[float, doc("modelled bytes moved, all calls")]
    flops: Annotated[float, doc("modelled FLOPs, all calls")]
    bandwidth_tbs: Annotated[float | None, doc("the roof's memory bandwidth; null: no roof")]
    memory_floor_us: Annotated[float | None, doc("the modelled bytes at the roof's bandwidth; null: no bandwidth")]
    parts_us: PartsUs


class RooflineTiming(Row, kw_only=True):
    """The time split per basis; null: the trace has no such time."""
    gpu: Timing | None
    cpu: Timing | None


class Roofline(Row, kw_only=True):
    """Per layer type, implementation and length class (Lq, Lk by powers of two): FLOPs, modelled bytes,
    intensity, achieved vs attainable, bound; per run: the time split compare subtracts (docs/api.md)."""
    roof: Roof | None
    time_basis: Basis
    convention: dict[str, str]
    layers: list[RooflineLayer]
    layers_omitted: Count
    above_roof: Annotated[str, doc("set when any point is above the roof: the sentence that says so and how to "
                                   "re-measure")] | UnsetType = UNSET
    timing: RooflineTiming
