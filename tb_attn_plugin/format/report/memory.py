"""The report's memory section (tb_attn_plugin/memory/): generated into frontend/src/memory_types.ts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .base import NonNeg, Pass, Row, doc


class MemoryDevice(Row, kw_only=True):
    """One device's peak and event count."""
    device: str
    peak_bytes: int
    events: int
    attention_calls: Annotated[int, doc("snapshots attributed by frames: attention calls found on this "
                                       "device")] | UnsetType = UNSET


class MemoryLive(Row, kw_only=True):
    """Bytes live at the peak of one layer, stage and score-matrix flag."""
    layer: str | None
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    score_matrix: bool
    bytes: int
    blocks: int
    largest_block: Annotated[int, doc("bytes")]
    frame: str | None
    stack: Annotated[list[str] | None, doc(
        "snapshots: the largest block's frames that memory/frame_rules.py names (attention, ops, autograd "
        "nodes; C++ frames included) and its Python frames, innermost first")] | UnsetType = UNSET


class MemoryPeak(Row, kw_only=True):
    """The highest live bytes, where they fall and what is live then."""
    bytes: int
    t_us: float
    layer: str | None
    step: int | None | UnsetType = UNSET
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    attention_bytes: Annotated[int | None, doc("null: nothing in the record tells attention's blocks (see "
                                              "attribution)")]
    attention_share: Annotated[NonNeg | None, doc("null: attention unknown, never 0 (see attribution)")]
    score_matrix_bytes: int
    before_record_bytes: Annotated[int, Meta(ge=0), doc(
        "bytes live at the peak that no recorded allocation explains (allocated before the record began)")]
    reserved_bytes: int | None
    reserved_minus_allocated: Annotated[int | None, doc("bytes")]
    live: Annotated[list[MemoryLive], doc("what is live at the peak, grouped by layer, stage and score-matrix "
                                         "flag, largest first (at most 12)")]
    explanation: str


class MemoryScoreMatrix(Row, kw_only=True):
    """Allocations of exactly one call's score matrix, B·H·Lq·Lk·itemsize bytes (or that rounded up to 512
    bytes, the CUDA allocator's block size)."""
    blocks: int
    bytes_total: int
    bytes_per_call_max: int


class MemoryOom(Row, kw_only=True):
    """An out-of-memory event of a snapshot."""
    time_us: float
    bytes: int
    device_free: Annotated[int, doc("bytes")]
    layer: str | None


class MemoryChurn(Row, kw_only=True):
    """Allocator churn; the segment_* and oom fields exist for snapshots only."""
    allocs: int
    frees: int
    bytes_allocated: int
    unpaired_frees: int
    live_at_end: Annotated[int, doc("blocks")]
    segment_allocs: int | UnsetType = UNSET
    segment_frees: int | UnsetType = UNSET
    segment_maps: int | UnsetType = UNSET
    segment_unmaps: int | UnsetType = UNSET
    flush_retries: Annotated[int, doc("segment frees directly followed by a segment alloc: the allocator "
                                     "emptied its cache to satisfy an allocation")] | UnsetType = UNSET
    skipped_entries: int | UnsetType = UNSET
    ooms: list[MemoryOom] | UnsetType = UNSET


class MemoryCurve(Row, kw_only=True):
    """Live bytes over time, downsampled (per time bucket the first, lowest and highest point, the peak always
    kept; at most about 3000 points); t_us relative to start_us."""
    start_us: float
    t_us: list[float]
    bytes: list[int]
    reserved: list[int] | None
    points_total: int


class MemorySpan(Row, kw_only=True):
    """The time window of one call's stage (for shading the curve)."""
    call: int
    layer: str
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    start_us: float
    end_us: float


class MemoryCall(Row, kw_only=True):
    """One call's allocations."""
    layer: str
    step: int
    score_bytes: int | None
    bytes_allocated: int
    allocs: int
    score_matrix_bytes: int
    score_matrix_blocks: int
    bwd_bytes_allocated: int
    peak_growth_bytes: int


class MemoryLayerStage(Row, kw_only=True):
    """A layer's allocations in one stage and pass."""
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    bytes_allocated: int
    allocs: int
    score_matrix_blocks: int


class MemoryLayer(Row, kw_only=True):
    """One layer's allocations over its calls."""
    layer: str
    calls: int
    bytes_allocated: int
    allocs: int
    peak_growth_bytes: int
    score_bytes: int | None
    score_matrix_bytes_per_call: int
    score_matrix_blocks: int
    stages: Annotated[list[MemoryLayerStage], doc("the layer's allocations by stage and pass, "
                                                 "largest first")] | UnsetType = UNSET


class MemoryStage(Row, kw_only=True):
    """All calls' allocations in one stage and pass."""
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    bytes_allocated: int
    allocs: int
    score_matrix_blocks: int
    score_matrix_bytes: int


class MemorySnapshot(Row, kw_only=True):
    """The CUDA memory snapshot the section was read from."""
    file: str
    entries: int
    segments: int
    annotations: int
    allocator_settings: dict[str, Any]


class MemoryAttribution(Row, kw_only=True):
    """Snapshots: how attention's allocations were found."""
    by: Literal["annotations", "frames", "unknown"]
    reason: str | UnsetType = UNSET
    sites: list[str] | UnsetType = UNSET
    unattributed_bwd_allocs: int | UnsetType = UNSET
    unattributed_bwd_bytes: int | UnsetType = UNSET
    allocs_without_frames: int | UnsetType = UNSET
    bytes_without_frames: int | UnsetType = UNSET
    gqa_calls: int | UnsetType = UNSET
    gqa_layers: list[str] | UnsetType = UNSET
    structure_sites: Annotated[list[str], doc("sites found by what they allocate (a matmul, a softmax of its "
                                              "size, a matmul), not by a name")] | UnsetType = UNSET
    devices_with_attention: list[str] | UnsetType = UNSET


class MemoryAttentionPeak(Row, kw_only=True):
    """When attention's own live blocks were largest (the device's peak may come after they are freed)."""
    bytes: int
    t_us: float
    live_bytes: int
    share: float | None


class MemorySection(Row, kw_only=True):
    """Where memory goes (tb_attn_plugin/memory/): from the profiler's [memory] events, or a CUDA memory snapshot."""
    version: Literal[1]
    source: Literal["profiler", "snapshot"]
    device: str
    devices: list[MemoryDevice]
    time_basis: Annotated[Literal["us", "index"], doc("index: the snapshot records no time_us, entries are "
                                                     "numbered")]
    events: int
    peak_bytes: int
    peak: MemoryPeak | None
    score_matrix: MemoryScoreMatrix
    churn: MemoryChurn
    curve: MemoryCurve
    spans: Annotated[list[MemorySpan], doc("time window of each call's stages (for shading the curve), at most 3000")]
    calls: list[MemoryCall]
    calls_omitted: int
    layers: list[MemoryLayer]
    stages: list[MemoryStage]
    snapshot: MemorySnapshot | UnsetType = UNSET
    snapshot_section: Annotated[MemorySection, doc(
        "the snapshot's own section, when the trace's comes first")] | UnsetType = UNSET
    attribution: MemoryAttribution | UnsetType = UNSET
    attention_peak: MemoryAttentionPeak | UnsetType = UNSET
