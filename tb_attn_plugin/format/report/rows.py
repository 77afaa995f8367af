"""The report's run-wide parts: the file, the device, steps, stages, kernels, ops, sampled calls, the safety net."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .base import Count, NonNeg, Pass, Positive, Row, Stage, Tflops, doc


class Source(Row, kw_only=True):
    """The file analysed."""
    path: str
    file: str
    worker: str
    span: str
    size_bytes: Annotated[int | None, doc("on disk (compressed); null: the size could not be read")]
    json_bytes: Annotated[int | None, doc("the JSON text, uncompressed")]


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
    sm_count: Annotated[int | None, doc("SMs (NVIDIA) or CUs (AMD)")]
    count: Annotated[int, doc("devices in the trace's deviceProperties")]
    peak_tflops: Annotated[float | None, doc("bf16 (else fp16) dense peak")]
    identified_by: Literal["name", "facts", "none"]
    model: Annotated[str | None, doc("the device table's row name")]
    peaks: DevicePeaks | None


class Step(Row, kw_only=True):
    """One profiler step."""
    step: int
    gpu_us: float
    cpu_us: float
    attention_gpu_us: float
    attention_cpu_us: float
    calls: int
    unrecorded_launches: Annotated[int, Meta(ge=1), doc(
        "present when kernel launches of this step have no kernel in the trace (gpu_window): its gpu_us "
        "is a lower bound")] | UnsetType = UNSET


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
    fingerprint: Annotated[str, doc(
        "one line: library · pass · dtype · math unit · tile · layout · arch · knob · split")]


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
    depth: Annotated[int, doc("nesting below the call's root op (kernels: 0)")]
    thread: Annotated[str, doc("CPU ops: the thread (trace tid) that ran the op")] | UnsetType = UNSET
    stream: Annotated[str, doc("kernels: the GPU stream the kernel ran on")] | UnsetType = UNSET
    correlation: Annotated[int, doc("kernels: the launch's correlation id, where the trace records one (the id a "
                                    "reading's evidence lists)")] | UnsetType = UNSET
    ts_us: Annotated[float, doc("CPU ops of a trace with no GPU kernel: the op's ts as the trace records it (the id a "
                                "reading's evidence lists)")] | UnsetType = UNSET


class CallSample(Row, kw_only=True):
    """A sampled call's events, for the one-call timeline."""
    id: int
    layer: str
    step: int
    implementation: str
    start_us: Annotated[float, doc("trace clock")]
    dur_us: float
    truncated: Annotated[bool, doc("more events than the sample keeps")]
    events: list[CallEvent]
    gpu_recorded: Annotated[Literal["none", "partly"], doc(
        "present when the call lost kernel launches (gpu_window): none or only part of its GPU work was "
        "recorded")] | UnsetType = UNSET
    phase: Annotated[Literal["prefill", "decode", "mixed", "unknown"], doc(
        "the call's serving phase from evidence (overview/phase_rules.py)")] | UnsetType = UNSET


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
    backward_links: Annotated[int, doc("forward ops that autograd links to a backward op")]
    truncated: Annotated[bool, doc("the file ended early (still being written, or a partial copy): only the "
                                  "events before the cut were analysed")]


class UnknownKernel(Row, kw_only=True):
    """A kernel named like attention that no family and no call explains (attention/safety.py)."""
    name: str
    count: Count
    gpu_us: NonNeg
    share: Annotated[float, Meta(ge=0), doc("of all GPU time of the trace")]
    toml: Annotated[str, doc('a [[family]] row matching the name, ready to edit and pass with --patterns FILE; '
                            '"" when no pattern taken from the name leaves the trace\'s other kernels alone')]
    pattern: Annotated[str | None, doc(
        "the row's pattern: the name's most distinctive token (never a wrapper such as cutlass::device_kernel), "
        "checked to match no kernel of this trace outside unknown_kernels; null when none does")] | UnsetType = UNSET
    pattern_why: Annotated[str, doc("how the pattern was chosen and checked, in words")] | UnsetType = UNSET


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
    cut: Annotated[bool, doc("some of them came after the last launch whose kernel was recorded: the window was cut")]
    unrecorded_launches: Positive
    after_last_recorded: Count
    first_unrecorded_ts_us: Annotated[float, doc("trace clock, µs")]
    gpu_end_ts_us: Annotated[float | None, doc("end of the last recorded GPU activity, trace clock, µs")]
    calls_not_recorded: Annotated[int, Meta(ge=0), doc("attention calls with no recorded kernel")]
    calls_partly_recorded: Count
    launches_outside_calls: Count
    calls: Annotated[list[GpuWindowCall], doc("the attention calls that lost kernels, in trace order, at most 100")]


class BeforeWindow(Row, kw_only=True):
    """GPU activities (kernels, memcpys, memsets) launched before the window (trace/window.py): no launch of
    the trace carries their correlation id, which is older than every launch's; kineto flushed them from
    before the profiler's window (some run while the window's first calls wait for them). They are in no
    attention call of the window; a trace without runtime calls cannot place its window and has none."""
    gpu_activities: Positive
    gpu_us: Annotated[float, Meta(ge=0), doc("their summed durations, µs")]
    first_ts_us: Annotated[float, doc("the earliest one's start, trace clock, µs")]
    window_start_ts_us: Annotated[float, doc("the window's first runtime or driver call, trace clock, µs")]


class UnjoinedKernel(Row, kw_only=True):
    """A known attention sub-stage kernel that joined no attention call."""
    name: str
    family: Annotated[str, doc("the kernel-table row that knows it")]
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    count: Count
    gpu_us: NonNeg
    share: Annotated[float, Meta(ge=0), doc("of all GPU time of the trace")]


class GpuAccounting(Row, kw_only=True):
    """Where the GPU kernel time went, in four parts that add up to total_us: attention calls, kernels known
    not to be attention, attention sub-stage kernels in no call (unjoined_kernels), kernels named like
    attention that nothing explains (unknown_kernels)."""
    total_us: NonNeg
    attention_calls_us: NonNeg
    not_attention_us: NonNeg
    unjoined_helpers_us: NonNeg
    unknown_us: NonNeg
    accounted_share: Annotated[NonNeg | None, doc(
        "(attention_calls_us + not_attention_us) / total_us: the share of GPU time the report can say is or is "
        "not attention; null when total_us is 0")]


class KernelTable(Row, kw_only=True):
    """The kernel-name table the analysis used: built-in rows plus user rows (--patterns, TB_ATTN_PATTERNS)."""
    families: Count
    user_families: Count
    user_sources: Annotated[list[str], doc("file names of the pattern files")]
