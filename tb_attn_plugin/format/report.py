"""The report's format as typed msgspec Structs: the one source of report/schema.json and the frontend's types.

``report/build.py`` still assembles plain dicts (the hot path stays as it was); these Structs say what
those dicts hold, and tests/test_format_generated.py converts real reports into ``Report`` with
``strict=True``, so a key the engine writes that is missing here (or a wrong type) fails a test.

Conventions: times are µs (``_us``), sizes bytes (``_bytes``), rates TFLOP/s (``tflops``) and TB/s
(``_tbs``); a unit that the name does not carry is in a description. ``None`` means unknown, never 0.
A field the engine writes only sometimes is ``T | UnsetType = UNSET`` (optional in the schema).

To add a section (or a field):
  1. add its Struct(s) here (subclass ``Row``; a docstring or ``Meta(description=...)`` per field
     whose unit is not in its name) and a field on ``Report`` (or on the section it belongs to);
  2. write it in the engine (``report/build.py`` or the section's module);
  3. run ``python -m tb_attn_plugin.format.generate``: it rewrites report/schema.json,
     frontend/src/types.ts and frontend/src/memory_types.ts (a Struct reachable from
     ``MemorySection`` goes to memory_types.ts, every other one to types.ts, as an interface of
     the same name; a Literal equal to one of ``TS_ALIASES`` is written as that alias's name).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from . import tags

__all__ = ["Report", "SnapshotReport", "MemorySection", "TS_ALIASES", "UNSET"]


class Row(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every part of the report: unknown keys are errors, optional keys are left out when unset."""


def _d(text: str) -> Meta:
    return Meta(description=text)


# --- value types shared by several sections -------------------------------------------------------

Pass = Literal["fwd", "bwd"]
Basis = Literal["gpu", "cpu"]
Stage = Literal[tags.STAGES]  # type: ignore[valid-type]  # the tag format's stages, in its order
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
Count = Annotated[int, Meta(ge=0)]
NonNeg = Annotated[float, Meta(ge=0)]
Positive = Annotated[int, Meta(ge=1)]

# Literal types the TypeScript side names (types.ts exports them; the frontend imports them).
TS_ALIASES: dict[str, Any] = {"Pass": Pass, "Basis": Basis, "Stage": Stage}


class Tflops(Row, kw_only=True):
    """Peak TFLOP/s by precision; null: the datasheet gives none for it."""
    fp32: float | None | UnsetType = UNSET
    tf32: float | None | UnsetType = UNSET
    bf16: float | None | UnsetType = UNSET
    fp16: float | None | UnsetType = UNSET
    fp8: float | None | UnsetType = UNSET


# --- source, device, steps ----------------------------------------------------------------------

class Source(Row, kw_only=True):
    """The file analysed."""
    path: str
    file: str
    worker: str
    span: str
    size_bytes: int | None  # on disk (compressed); null: the size could not be read
    json_bytes: int | None  # the JSON text, uncompressed


class DevicePeaks(Row, kw_only=True):
    """The device table's datasheet row for the GPU."""
    tflops: Tflops
    bandwidth_tbs: Annotated[float, Meta(gt=0)]
    source: Annotated[str, Meta(min_length=1)]
    kind: Literal["datasheet"]


class Device(Row, kw_only=True):
    """The GPU of the trace (roofline/devices.py describe); null on the report for a CPU-only trace."""
    name: str
    vendor: Literal["NVIDIA", "AMD", None]
    compute_capability: str | None
    memory_bytes: int | None
    sm_count: int | None  # SMs (NVIDIA) or CUs (AMD)
    count: int  # devices in the trace's deviceProperties
    peak_tflops: float | None  # bf16 (else fp16) dense peak
    identified_by: Literal["name", "facts", "none"]
    model: str | None  # the device table's row name
    peaks: DevicePeaks | None


class Step(Row, kw_only=True):
    """One profiler step."""
    step: int
    gpu_us: float
    cpu_us: float
    attention_gpu_us: float
    attention_cpu_us: float
    calls: int
    unrecorded_launches: Annotated[int, Meta(ge=1), _d(
        "present when kernel launches of this step have no kernel in the trace (gpu_window): its gpu_us "
        "is a lower bound")] | UnsetType = UNSET


class StageRow(Row, kw_only=True):
    """Time of one stage and pass."""
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    gpu_us: float
    cpu_us: float
    kernels: int
    launches: int


# --- layers -------------------------------------------------------------------------------------

class Shape(Row, kw_only=True):
    """Attention's shape; null fields: unknown."""
    batch: int | None | UnsetType = UNSET
    q_heads: int | None | UnsetType = UNSET
    kv_heads: int | None | UnsetType = UNSET
    q_len: int | None | UnsetType = UNSET  # tokens
    k_len: int | None | UnsetType = UNSET  # tokens
    head_dim: int | None | UnsetType = UNSET
    batch_heads: int | None | UnsetType = UNSET


class LayerKernel(Row, kw_only=True):
    """A kernel of one layer, over all its calls."""
    name: str
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    count: int
    gpu_us: float


class KernelOccupancy(Row, kw_only=True):
    """Theoretical occupancy (attention/occupancy.py, CUDA rules) beside CUPTI's est. achieved occupancy."""
    name: str
    registers_per_thread: int | None
    shared_memory_bytes: int | None  # per block
    block_threads: int | None
    configurations: int  # distinct launch configurations of the kernel
    blocks_per_sm: int | None
    warps_per_sm: int | None
    max_warps_per_sm: int | None
    theoretical_pct: float | None
    limited_by: list[Literal["registers", "shared memory", "warps", "blocks"]]
    achieved_pct: float | None
    launch_api: str | None
    reading: str


class Refusal(Row, kw_only=True):
    """A backend check that refused the call."""
    check: str
    reason: str
    fix: str
    source: str


class UnknownCheck(Row, kw_only=True):
    """A backend check the trace cannot decide."""
    check: str
    why: str


class BackendCheck(Row, kw_only=True):
    """One SDPA backend: eligible (null: unknown), what refused it and what could not be checked."""
    backend: Literal["flash", "efficient", "cudnn"]
    eligible: bool | None
    refusals: list[Refusal]
    unknown: list[UnknownCheck]


class WhyNotFlash(Row, kw_only=True):
    """PyTorch's SDPA backend checks (attention/eligibility_rules.py) replayed on the layer's first
    aten::scaled_dot_product_attention call."""
    device: str
    rules: str
    ran: str | None
    backends: list[BackendCheck]


class Layer(Row, kw_only=True):
    """One attention layer, over all its calls."""
    layer: str
    layer_type: str
    calls: int
    backend: str
    compiled: bool
    source: Literal["tag", "op", "module", "motif", "kernel"]
    shape: Shape | None
    dtype: str | None
    causal: bool | None
    dropout: float | None  # probability
    mask: str | None
    flops: float | None  # FLOPs of the calls whose time was recorded; null: shape unknown
    score_bytes: int | None  # the largest score matrix of an unfused call
    memory_bytes: int | None  # the largest peak growth of its calls (memory section)
    first_call: int  # id of its first call
    kernels: Annotated[list[LayerKernel], _d("the layer's kernels over all its calls, largest first (at most 100)")]
    implementation: str  # its calls' implementations, most common first, joined by "+"
    gpu_us: float
    cpu_us: float
    stages: list[StageRow]
    tflops: float | None  # TFLOP/s over its core stages' time
    gpu_unrecorded_calls: Annotated[int, Meta(ge=1), _d(
        "present when some of the layer's calls lost kernel launches (gpu_window): its gpu_us is a lower "
        "bound, and those calls' FLOPs are left out of flops/tflops")] | UnsetType = UNSET
    occupancy: list[KernelOccupancy]
    why_not_flash: Annotated[WhyNotFlash | None, _d(
        "null: no aten::scaled_dot_product_attention op with recorded shapes")]


# --- run-wide rows ------------------------------------------------------------------------------

class Implementation(Row, kw_only=True):
    """Calls of one layer type by one implementation."""
    layer_type: str
    implementation: str
    calls: int


class Kernel(Row, kw_only=True):
    """A kernel of attention, over the whole run."""
    name: str
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    implementation: str
    count: int
    gpu_us: float
    fingerprint: Annotated[str, _d("one line: library · pass · dtype · math unit · tile · layout · arch · knob · split")]


class Op(Row, kw_only=True):
    """A CPU op of attention, over the whole run."""
    name: str
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    count: int
    cpu_us: float


class CallEvent(Row, kw_only=True):
    """One op or kernel of a sampled call; times relative to the call's start."""
    name: str
    kind: Literal["op", "kernel"]
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    start_us: float
    dur_us: float
    depth: int  # nesting below the call's root op (kernels: 0)
    thread: Annotated[str, _d("CPU ops: the thread (trace tid) that ran the op")] | UnsetType = UNSET
    stream: Annotated[str, _d("kernels: the GPU stream the kernel ran on")] | UnsetType = UNSET


class CallSample(Row, kw_only=True):
    """A sampled call's events, for the one-call timeline."""
    id: int
    layer: str
    step: int
    implementation: str
    start_us: float  # trace clock
    dur_us: float
    truncated: bool  # more events than the sample keeps
    events: list[CallEvent]
    gpu_recorded: Annotated[Literal["none", "partly"], _d(
        "present when the call lost kernel launches (gpu_window): none or only part of its GPU work was "
        "recorded")] | UnsetType = UNSET


class Verdict(Row, kw_only=True):
    """One finding, in words."""
    id: str
    severity: Literal["info", "warn"]
    message: str


class TraceCounts(Row, kw_only=True):
    """What the trace held."""
    events: int
    kernels: int
    ops: int
    unlinked_kernels: int
    graph_kernels: int
    backward_links: int  # forward ops that autograd links to a backward op
    truncated: Annotated[bool, _d("the file ended early (still being written, or a partial copy): only the "
                                  "events before the cut were analysed")]


class UnknownKernel(Row, kw_only=True):
    """A kernel named like attention that no family and no call explains (attention/safety.py)."""
    name: str
    count: Count
    gpu_us: NonNeg
    share: Annotated[float, Meta(ge=0), _d("of all GPU time of the trace")]
    toml: Annotated[str, _d('a [[family]] row matching the name, ready to edit and pass with --patterns FILE; '
                            '"" when no pattern taken from the name leaves the trace\'s other kernels alone')]
    pattern: Annotated[str | None, _d(
        "the row's pattern: the name's most distinctive token (never a wrapper such as cutlass::device_kernel), "
        "checked to match no kernel of this trace outside unknown_kernels; null when none does")] | UnsetType = UNSET
    pattern_why: Annotated[str, _d("how the pattern was chosen and checked, in words")] | UnsetType = UNSET


class GpuWindowCall(Row, kw_only=True):
    """An attention call that lost kernel launches."""
    id: int
    layer: str
    step: int
    unrecorded_launches: Positive
    recorded: Literal["none", "partly"]


class GpuWindow(Row, kw_only=True):
    """Kernel launches whose kernels the trace lacks (trace/window.py): the profiler stopped before the GPU
    finished (no synchronize at the end of the window: cut) or activity records were lost. Their calls'
    GPU time is not recorded, not 0."""
    cut: Annotated[bool, _d("some of them came after the last launch whose kernel was recorded: the window was cut")]
    unrecorded_launches: Positive
    after_last_recorded: Count
    first_unrecorded_ts_us: Annotated[float, _d("trace clock, µs")]
    gpu_end_ts_us: Annotated[float | None, _d("end of the last recorded GPU activity, trace clock, µs")]
    calls_not_recorded: Annotated[int, Meta(ge=0), _d("attention calls with no recorded kernel")]
    calls_partly_recorded: Count
    launches_outside_calls: Count
    calls: Annotated[list[GpuWindowCall], _d("the attention calls that lost kernels, in trace order, at most 100")]


class UnjoinedKernel(Row, kw_only=True):
    """A known attention sub-stage kernel that joined no attention call."""
    name: str
    family: Annotated[str, _d("the kernel-table row that knows it")]
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    count: Count
    gpu_us: NonNeg
    share: Annotated[float, Meta(ge=0), _d("of all GPU time of the trace")]


class GpuAccounting(Row, kw_only=True):
    """Where the GPU kernel time went, in four parts that add up to total_us: attention calls, kernels known
    not to be attention, attention sub-stage kernels in no call (unjoined_kernels), kernels named like
    attention that nothing explains (unknown_kernels)."""
    total_us: NonNeg
    attention_calls_us: NonNeg
    not_attention_us: NonNeg
    unjoined_helpers_us: NonNeg
    unknown_us: NonNeg
    accounted_share: Annotated[NonNeg | None, _d(
        "(attention_calls_us + not_attention_us) / total_us: the share of GPU time the report can say is or is "
        "not attention; null when total_us is 0")]


class KernelTable(Row, kw_only=True):
    """The kernel-name table the analysis used: built-in rows plus user rows (--patterns, TB_ATTN_PATTERNS)."""
    families: Count
    user_families: Count
    user_sources: Annotated[list[str], _d("file names of the pattern files")]


# --- roofline -----------------------------------------------------------------------------------

class Roof(Row, kw_only=True):
    """The roof the points are read against."""
    kind: Literal["datasheet", "measured"]
    device: str | None
    source: str | None
    method: str | UnsetType = UNSET
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
    bytes: NonNeg  # modelled bytes moved
    time_us: float
    units: Count  # kernels (CPU: ops)
    intensity: float | None  # FLOP per byte
    achieved_tflops: float | None
    achieved_tbs: float | None
    precision: Precision | UnsetType = UNSET
    peak_tflops: float | None | UnsetType = UNSET
    bandwidth_tbs: float | None | UnsetType = UNSET
    attainable_tflops: float | None
    fraction: float | None  # achieved / attainable
    bandwidth_fraction: float | None | UnsetType = UNSET  # achieved_tbs / bandwidth_tbs
    mean_unit_us: float | None | UnsetType = UNSET
    bound: Literal["compute", "memory", "launch", None]
    bound_reason: str


class RooflineStage(RooflinePoint, kw_only=True):
    """One modelled stage and pass of a roofline point."""
    stage: Literal["qk_matmul", "scale_mask", "softmax", "dropout", "av_matmul", "fused"]
    pass_: Pass = msgspec.field(name="pass")


class RooflineLayer(RooflinePoint, kw_only=True):
    """One layer type, implementation and length class."""
    layer_type: str
    implementation: str
    label: Annotated[str, _d("'Owlv2Attention (eager)', with ', L 5185×5185' when the layer type and "
                             "implementation have several length classes")]
    calls: int
    modelled_calls: int | UnsetType = UNSET
    dtype: str | None | UnsetType = UNSET
    shape: Shape | None | UnsetType = UNSET
    lengths: Annotated[Lengths | None, _d("the class's [min, max] of q_len and k_len; null when no call has a "
                                          "shape")] | UnsetType = UNSET
    lengths_text: Annotated[str | None, _d("'L 5185×5185' or 'Lq 1, Lk 1024–2047'; null unless the layer type "
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
    units: int
    gaps: int
    launch_gap_us: float | UnsetType = UNSET
    dispatch_us: float | UnsetType = UNSET
    modelled_us: float
    bytes: float
    flops: float
    bandwidth_tbs: float | None
    memory_floor_us: float | None
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
    timing: RooflineTiming


# --- reading ------------------------------------------------------------------------------------

class Extra(Row, kw_only=True):
    """Kernels beyond the expected ones, by cause."""
    cause: Literal["hidden_copy", "mask_built_per_call", "safe_softmax_guard", "dtype_cast", "layout_copy",
                   "buffer_fill", "repeated_step", "unexplained"]
    step: str | None
    what: str
    per_call: NonNeg  # kernels (CPU: ops) per call
    us_per_call: NonNeg
    us_per_step: NonNeg | None
    names: list[str]
    fix: str
    source: str


class Flag(Row, kw_only=True):
    """A kernel that runs as expected but slower than it could (an fp32 GEMM)."""
    flag: Literal["fp32_gemm"]
    what: str
    per_call: NonNeg
    us_per_call: NonNeg
    names: list[str]
    fix: str
    source: str


class Outside(Row, kw_only=True):
    """Kernels launched inside the call that belong to no stage."""
    per_call: NonNeg
    us_per_call: NonNeg
    names: list[str]


class Expected(Row, kw_only=True):
    """Expected against actual kernels per forward (attention/expected.py, expectations.py)."""
    unit: Literal["kernels", "ops"]  # GPU kernels, or on a CPU trace the ops that do work
    expected: Count | None
    expected_steps: list[str] | None
    reason_unknown: str | None
    ran: Count
    ran_min: Count
    ran_max: Count
    extras: list[Extra]
    flags: list[Flag]
    transposes: Count | None
    transposes_expected: Count | None
    outside: Outside
    source: str
    summary: str


class LaunchApi(Row, kw_only=True):
    """A runtime API called per call."""
    name: str
    per_call: NonNeg
    note: str
    source: str


class HostCost(Row, kw_only=True):
    """The cost on the host per call (attention/host_cost.py)."""
    scope: str | None
    host_us_per_call: NonNeg
    gpu_us_per_call: NonNeg | None
    attention_op_self_us_per_call: NonNeg
    dispatch_us_per_call: NonNeg
    launch_us_per_call: NonNeg
    launch_apis: list[LaunchApi]
    occupancy_queries_per_call: NonNeg
    syncs_per_call: NonNeg
    host_bound: bool | None
    fix: str | None
    source: str
    graph_replay: bool
    summary: str


class ReadingRow(Row, kw_only=True):
    """A layer type × implementation read the way 'Attention is all you profile' reads a call."""
    layer_type: str
    implementation: str
    calls: Positive
    expected: Expected | None
    host: Annotated[HostCost | None, _d("null for calls with no host side (graph replay only)")]


class Fingerprint(Row, kw_only=True):
    """A kernel name decoded by attention/fingerprint_rules.py; null fields: no rule matched (unknown)."""
    summary: str
    flags: list[str]
    library: str | None
    pass_: str | None = msgspec.field(name="pass")
    dtype: str | None
    math_unit: str | None
    tile: str | None
    layout: str | None
    arch: str | None
    knob: str | None
    split: str | None


class KernelReading(Row, kw_only=True):
    """report/kernel_reading.py: each distinct kernel name of attention, decoded once; what occupancy could be read."""
    device_arch: str | None
    occupancy: str
    fingerprints: dict[str, Fingerprint]  # by kernel name


# --- memory (memory_types.ts) -------------------------------------------------------------------

class MemoryDevice(Row, kw_only=True):
    """One device's peak and event count."""
    device: str
    peak_bytes: int
    events: int
    attention_calls: Annotated[int, _d("snapshots attributed by frames: attention calls found on this "
                                       "device")] | UnsetType = UNSET


class MemoryLive(Row, kw_only=True):
    """Bytes live at the peak of one layer, stage and score-matrix flag."""
    layer: str | None
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    score_matrix: bool
    bytes: int
    blocks: int
    largest_block: int  # bytes
    frame: str | None
    stack: Annotated[list[str] | None, _d(
        "snapshots: the largest block's frames that memory/frame_rules.py names (attention, ops, autograd "
        "nodes; C++ frames included), innermost first")] | UnsetType = UNSET


class MemoryPeak(Row, kw_only=True):
    """The highest live bytes, where they fall and what is live then."""
    bytes: int
    t_us: float
    layer: str | None
    step: int | None | UnsetType = UNSET
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    attention_bytes: Annotated[int | None, _d("null: nothing in the record tells attention's blocks (see "
                                              "attribution)")]
    attention_share: Annotated[NonNeg | None, _d("null: attention unknown, never 0 (see attribution)")]
    score_matrix_bytes: int
    before_record_bytes: Annotated[int, Meta(ge=0), _d(
        "bytes live at the peak that no recorded allocation explains (allocated before the record began)")]
    reserved_bytes: int | None
    reserved_minus_allocated: int | None  # bytes
    live: Annotated[list[MemoryLive], _d("what is live at the peak, grouped by layer, stage and score-matrix "
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
    device_free: int  # bytes
    layer: str | None


class MemoryChurn(Row, kw_only=True):
    """Allocator churn; the segment_* and oom fields exist for snapshots only."""
    allocs: int
    frees: int
    bytes_allocated: int
    unpaired_frees: int
    live_at_end: int  # blocks
    segment_allocs: int | UnsetType = UNSET
    segment_frees: int | UnsetType = UNSET
    segment_maps: int | UnsetType = UNSET
    segment_unmaps: int | UnsetType = UNSET
    flush_retries: Annotated[int, _d("segment frees directly followed by a segment alloc: the allocator "
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
    stages: Annotated[list[MemoryLayerStage], _d("the layer's allocations by stage and pass, "
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
    time_basis: Annotated[Literal["us", "index"], _d("index: the snapshot records no time_us, entries are "
                                                     "numbered")]
    events: int
    peak_bytes: int
    peak: MemoryPeak | None
    score_matrix: MemoryScoreMatrix
    churn: MemoryChurn
    curve: MemoryCurve
    spans: Annotated[list[MemorySpan], _d("time window of each call's stages (for shading the curve), at most 3000")]
    calls: list[MemoryCall]
    calls_omitted: int
    layers: list[MemoryLayer]
    stages: list[MemoryStage]
    snapshot: MemorySnapshot | UnsetType = UNSET
    snapshot_section: MemorySection | UnsetType = UNSET  # the snapshot's own section, when the trace's comes first
    attribution: MemoryAttribution | UnsetType = UNSET
    attention_peak: MemoryAttentionPeak | UnsetType = UNSET


# --- the report ---------------------------------------------------------------------------------

class Report(Row, kw_only=True):
    """One trace file analysed by tb_attn_plugin.report.build.analyze_file. Times in microseconds."""
    schema_version: Literal[2]
    engine_version: str
    source: Source
    device: Device | None
    metadata: Annotated[dict[str, Any], _d("run metadata written by the collector (tags.METADATA_KEY)")]
    distributed: dict[str, Any]  # rank, world_size, backend as the trace's distributedInfo says (untrusted JSON)
    time_basis: Basis
    total_gpu_us: float
    total_cpu_us: float
    attention_gpu_us: float
    attention_cpu_us: float
    attention_share: Annotated[float, Meta(ge=0, le=1)]
    calls: Count
    steps: list[Step]
    stages: list[StageRow]
    layers: list[Layer]
    layers_omitted: Annotated[int, Meta(ge=0), _d("layers left out of `layers` (the smallest by time) to keep "
                                                  "the report compact")]
    implementations: list[Implementation]
    kernels: list[Kernel]
    ops: list[Op]
    call_samples: list[CallSample]
    trace: TraceCounts
    warnings: list[str]
    roofline: Roofline
    reading: Annotated[list[ReadingRow], _d("one row per layer type × implementation, most calls first "
                                            "(docs/api.md)")]
    verdicts: list[Verdict]
    memory: Annotated[MemorySection | None, _d(
        "null when the trace has no [memory] events and no snapshot joins it (record with profile_memory=True "
        "or tb_attn_plugin.profile(memory=True))")]
    unknown_kernels: Annotated[list[UnknownKernel], _d(
        "The safety net: kernels whose names look like attention (attn, attention, fmha, flash, sdpa, paged, "
        "sage, mla, ...) but that match no attention family of the kernel table and belong to no attention "
        "call; at most 50, by GPU time.")]
    unjoined_kernels: Annotated[list[UnjoinedKernel], _d(
        "Known attention sub-stage kernels (HELPER_STAGES of attention/patterns.py) that joined no attention "
        "call: their time is in no call's and is reported here, largest first, at most 50.")]
    gpu_accounting: Annotated[GpuAccounting | None, _d("null without GPU kernels")]
    kernel_table: KernelTable
    gpu_window: Annotated[GpuWindow | None, _d(
        "null when every kernel launch has its kernel (launches inside a stream capture run nothing and are "
        "not counted)")]
    kernel_reading: KernelReading
    analysis_seconds: float  # wall time of the analysis, s


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
    analysis_seconds: float  # wall time of the analysis, s
