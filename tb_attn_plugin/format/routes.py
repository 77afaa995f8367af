"""The plugin's route answers that are not the report itself, as typed msgspec Structs: the source of route_types.ts.

The plugin writes these answers as plain dicts (tb_attn_plugin/plugin/); tests/test_route_format.py asks
each route of the real TensorBoard app and converts its answer into the Struct below with
``strict=True``, so a key the plugin sends that is missing here (or a wrong type) fails a test, and
``python -m tb_attn_plugin.format.generate`` writes frontend/src/route_types.ts from them. A field the
plugin sends only sometimes is ``T | UnsetType = UNSET``; ``None`` means unknown, never 0.

"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .report.base import Basis, Count, Pass, Row, doc
from .report.memory import MemorySection
from .report.layers import KernelOccupancy, WhyNotFlash
from .report.reading import Expected, Fingerprint, HostCost, PhaseReading
from .report.rows import CallSample, Implementation, Kernel

Status = Literal["loading", "ready", "error"]


# ---- every route ------------------------------------------------------------------------------

class ErrorAnswer(Row, kw_only=True):
    """Any 4xx or 5xx answer of any route: one line a person can act on."""
    error: str


class LoadingAnswer(Row, kw_only=True):
    """202 from /report, /kernels, /call and /memory: the span is being analysed; ask again."""
    status: Literal["loading"]
    run: str
    worker: str
    span: str
    phase: Annotated[str | None, doc("what the analysis is doing now (reading, linking, ...)")]


class WaitingAnswer(Row, kw_only=True):
    """202 from /compare and /ranks: the runs (or ranks) still being analysed."""
    status: Literal["loading"]
    waiting_for: list[str]
    ready: Annotated[Count, doc("/ranks: ranks analysed so far")] | UnsetType = UNSET
    total: Annotated[Count, doc("/ranks: ranks of the run")] | UnsetType = UNSET


# ---- /runs ------------------------------------------------------------------------------------

class SpanSummary(Row, kw_only=True):
    """The few fields of a span's report that /runs shows without reading the report (plugin/work.py summary_of)."""
    kind: Literal["trace", "memory_snapshot"]
    metadata: dict[str, Any]
    time_basis: Basis | None
    calls: Count | None
    attention_share: float | None
    attention_gpu_us: float | None
    attention_cpu_us: float | None
    implementations: list[str]
    device: str | None
    warnings: Annotated[Count, doc("how many warnings the report has")]
    empty: Annotated[bool, doc("no step took time and no attention call: never the default span")]


class SpanInfo(Row, kw_only=True):
    """One file of a worker: a profiler span (or a memory snapshot)."""
    span: str
    status: Status
    size_bytes: int
    file: Annotated[str, doc("the file, relative to the logdir")]
    named: Annotated[str, doc(
        "how a file named without {worker}.{span} was named: from its head (rank, host and pid, start time) or "
        "its name, and why")] | UnsetType = UNSET
    message: Annotated[str, doc("status error: why the file cannot be analysed")] | UnsetType = UNSET
    phase: Annotated[str | None, doc("status loading: what the analysis is doing now")] | UnsetType = UNSET
    summary: Annotated[SpanSummary, doc("status ready")] | UnsetType = UNSET


class WorkerInfo(Row, kw_only=True):
    """A worker of a run and its spans, oldest first."""
    worker: str
    spans: list[SpanInfo]
    default_span: Annotated[str, doc("the span the tab opens: the latest that is not empty")]


class RunInfo(Row, kw_only=True):
    """A run: a directory of trace files."""
    run: str
    status: Annotated[Status, doc("loading while any span is, else ready when any span is")]
    workers: list[WorkerInfo]
    metadata: Annotated[dict[str, Any], doc("the collector's metadata of the default span, {} until it is ready")]


class SkippedFile(Row, kw_only=True):
    """A file that looks like a trace but is not listed."""
    file: str
    reason: str


class RunsDoc(Row, kw_only=True):
    """GET /runs: every run of the logdir."""
    runs: list[RunInfo]
    scanned: Annotated[bool, doc("the first scan of the logdir has finished")]
    error: Annotated[str, doc("why the logdir cannot be listed")] | UnsetType = UNSET
    skipped: Annotated[list[SkippedFile], doc("at most 200; skipped_count counts all")] | UnsetType = UNSET
    skipped_count: Count | UnsetType = UNSET


# ---- /kernels ---------------------------------------------------------------------------------

class KernelsDoc(Row, kw_only=True):
    """GET /kernels: the report's attention kernels, filtered by stage and pass."""
    run: str
    worker: str
    span: str
    time_basis: Basis
    kernels: list[Kernel]


# ---- /memory ----------------------------------------------------------------------------------

class MemoryDoc(Row, kw_only=True):
    """GET /memory: the report's memory section with its curve downsampled to the points asked for."""
    run: str
    worker: str
    span: str
    metadata: dict[str, Any]
    memory: MemorySection | None
    note: Annotated[str, doc("memory null: why, and how to record it when it was not asked for")] | UnsetType = UNSET


# ---- /call ------------------------------------------------------------------------------------

class CallReadingKernel(Row, kw_only=True):
    """One kernel of the call: launches and µs in this call, its fingerprint and occupancy, or why not."""
    name: str
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    launches: Count
    us: float
    fingerprint: Fingerprint | None
    fingerprint_unknown: str | None
    occupancy: KernelOccupancy | None
    occupancy_unknown: str | None


class CallReading(Row, kw_only=True):
    """The Reading panel of the call's layer type × implementation (reading/call.py panel); each piece the
    engine cannot tell is null with its reason in ``unknown``."""
    call: int | None
    layer: str | None
    layer_type: str | None
    implementation: str | None
    calls: Count | None
    phase: Annotated[str | None, doc("the call's serving phase")]
    phase_reading: Annotated[PhaseReading | None, doc(
        "its layer type's reading over that phase's calls; null where the report did not split the reading by "
        "phase (fewer than two phases among the calls)")]
    phases: Annotated[list[PhaseReading] | None, doc(
        "the row's reading over each phase's calls, prefill first (the panel's table); null where not split")]
    expected: Expected | None
    host: HostCost | None
    kernels: list[CallReadingKernel]
    kernels_omitted: Count
    device_arch: str | None
    occupancy_note: str | None
    why_not_flash: WhyNotFlash | None
    unknown: Annotated[dict[str, str], doc(
        "why a piece is null, by piece: layer, expected, host, gpu, kernels, why_not_flash, backward")]


class CallAnswer(CallSample, kw_only=True):
    """GET /call: the report's sample of the call, with the Reading panel."""
    reading: CallReading


# ---- /compare ---------------------------------------------------------------------------------

class CompareNoise(Row, kw_only=True):
    """Last run against the first: beyond the runs' step-to-step spread or not (report/noise.py)."""
    test: str
    alpha: float
    unit: Annotated[Literal["step", "call"], doc("call: too few steps, the calls' spread stands in")]
    samples_us: Annotated[list[list[float]], doc("first run's, last run's")]
    median_us: list[float | None]
    p_value: float | None
    method: str | None
    u: Annotated[float, doc("the Mann-Whitney U statistic, when the test ran")] | UnsetType = UNSET
    verdict: Literal["beyond_noise", "within_noise", "cannot_tell"]
    headline: str
    why: str
    sentence: str


class CompareStage(Row, kw_only=True):
    """One stage × pass across the runs, largest change first."""
    stage: str
    pass_: Pass = msgspec.field(name="pass")
    values: Annotated[list[float], doc("µs per run on the comparison's time basis")]
    delta_us: Annotated[float, doc("last run minus first")]
    delta_pct: float | None


class CompareLayer(Row, kw_only=True):
    """One layer type across the runs."""
    layer_type: str
    values: list[float]
    implementations: list[str | None]
    delta_us: float
    delta_pct: float | None
    layers: Annotated[list[list[str]], doc("the layers of this type, per run")]


class KernelOnlyIn(Row, kw_only=True):
    """A kernel that ran in one run only."""
    name: str
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    gpu_us: float
    count: Count | None


class OpOnlyIn(Row, kw_only=True):
    """An attention op that ran in one run only (a CPU run launches no kernels)."""
    name: str
    stages: Annotated[list[str], doc("where it ran: \"stage pass\" each")]
    cpu_us: float
    count: Count


class CompareTotal(Row, kw_only=True):
    """One run's attention totals."""
    run: str
    attention_gpu_us: float | None
    attention_cpu_us: float | None
    attention_share: float | None
    time_basis: Basis | None
    implementations: list[Implementation]
    calls: Count | None


class StepCompareRow(Row, kw_only=True):
    """One figure of the step (span, busy, a part, idle) across the runs."""
    figure: str
    values: list[float | None]
    delta_us: float | None
    delta_pct: float | None


class StepCompare(Row, kw_only=True):
    """The step's span, busy, parts and idle per run (overview/compare.py)."""
    rows: list[StepCompareRow]
    limits: Annotated[dict[str, str | None], doc("by run: what limits its steps, in words")]


class KernelChange(Row, kw_only=True):
    """First run against last: two differently named kernels with one fingerprint key, and what changed
    (report/kernel_changes.py)."""
    stage: str | None
    pass_: Pass | None = msgspec.field(name="pass")
    library: str
    runs: list[str]
    kernels: Annotated[list[str], doc("the first run's kernel, the last run's")]
    gpu_us: list[float]
    changed: Annotated[dict[str, list[str | None]], doc("by fingerprint field: [first, last]")]
    message: str


class MemoryCompareLayer(Row, kw_only=True):
    """One layer's memory across the runs (null: the run has no such layer)."""
    layer: str
    peak_growth_bytes: list[int | None]
    score_matrix_blocks: list[int | None]


class MemoryCompare(Row, kw_only=True):
    """Peaks and score-matrix bytes per run (report/memory_compare.py); null runs have no memory section."""
    runs: list[str]
    summary: str
    peak_bytes: list[int | None]
    peak_delta_bytes: int | None
    score_matrix_bytes: list[int | None]
    attention_share_of_peak: list[float | None]
    layers: list[MemoryCompareLayer]


class DecompositionParts(Row, kw_only=True):
    """The change split by cause, µs; they sum to measured_us."""
    memory: float
    compute: float
    launch: float
    cpu: float
    rest: float


class Decomposition(Row, kw_only=True):
    """The last run's change against the first split into memory, compute, launch, cpu and rest
    (roofline/decompose.py); each list is [first, last]."""
    basis: Basis
    runs: list[str]
    wall_us: list[float]
    busy_us: list[float]
    measured_us: Annotated[float, doc("last minus first")]
    parts_us: DecompositionParts
    bytes: list[float]
    bandwidth_tbs: list[float | None]
    memory_floor_us: list[float | None]
    units: list[Count]
    unit: Literal["kernels", "ops"]
    score_bytes: list[int]
    noise: Literal["beyond_noise", "within_noise", "cannot_tell"]
    sentence: str


class CompareDoc(Row, kw_only=True):
    """GET /compare: two or more runs side by side (report/compare.py)."""
    runs: Annotated[list[str], doc("the names of the sides, first is the baseline")]
    time_basis: Basis
    time_basis_note: str
    differences: Annotated[list[str], doc(
        "what differs besides the change compared (devices, models), said before any percentage")]
    noise: CompareNoise | None
    summary: str
    stages: list[CompareStage]
    layers: list[CompareLayer]
    kernels_only_in: dict[str, list[KernelOnlyIn]]
    kernels_only_in_counts: dict[str, Count]
    ops_only_in: Annotated[dict[str, list[OpOnlyIn]], doc("CPU runs have ops, not kernels: what ran in one run only")]
    ops_only_in_counts: dict[str, Count]
    kernel_changes: Annotated[list[KernelChange], doc("same work, other tile/dtype/arch, matched by fingerprint")]
    totals: list[CompareTotal]
    memory: Annotated[MemoryCompare | None, doc("null unless at least two runs have a memory section")]
    steps: Annotated[StepCompare | None, doc("null for reports written before the overview")]
    decomposition: Annotated[Decomposition | None, doc("null when a report has no roofline timing (older engine)")]
    warnings: Annotated[dict[str, list[str]], doc("by run: its report's warnings")]


# ---- /ranks -----------------------------------------------------------------------------------

class RankRow(Row, kw_only=True):
    """One rank's attention (ranks/summary.py)."""
    rank: int
    worker: str
    rank_from: Annotated[str, doc("where the rank was read: the trace's distributedInfo or the worker's name")]
    attention_us: float
    total_us: float
    calls: Count
    stages: Annotated[dict[str, float], doc("µs by stage")]
    implementations: list[str]
    backends: list[str]
    gpu_unrecorded_launches: Annotated[Count, doc(
        "kernel launches without their kernel (gpu_window): this rank's GPU time is a lower bound")]
    vs_median: Annotated[float | None, doc("attention_us over the median rank's")]


class DuplicateRank(Row, kw_only=True):
    """A rank seen twice: the first report is kept."""
    rank: int
    worker: str
    kept: str
    rank_from: str


class RankTime(Row, kw_only=True):
    """The slowest or fastest rank."""
    rank: int
    worker: str
    attention_us: float


class OddRank(Row, kw_only=True):
    """A rank whose set of implementations (or SDPA backends) is not the one most ranks have."""
    rank: int
    worker: str
    what: Literal["implementation", "backend"]
    value: str
    usual: str


class LayerSpread(Row, kw_only=True):
    """One layer's time across the ranks."""
    layer: str
    ranks: Count
    median_us: float
    min_us: float
    max_us: float
    spread: Annotated[float | None, doc("max_us over median_us")]
    slowest_rank: int


class RanksDoc(Row, kw_only=True):
    """GET /ranks: the ranks of a job side by side; or, for a run that is not a job of several ranks, why
    (not_a_job) and nothing else of the summary."""
    run: str
    not_a_job: Annotated[str, doc("why the run is not a job of several ranks")] | UnsetType = UNSET
    ranks_format: int | UnsetType = UNSET
    time_basis: Basis | UnsetType = UNSET
    time_basis_reason: str | UnsetType = UNSET
    world_size: int | None | UnsetType = UNSET
    rank_count: Count | UnsetType = UNSET
    missing_ranks: list[int] | UnsetType = UNSET
    missing_count: Count | UnsetType = UNSET
    unranked_workers: list[str] | UnsetType = UNSET
    unranked_count: Count | UnsetType = UNSET
    duplicate_ranks: list[DuplicateRank] | UnsetType = UNSET
    duplicate_count: Count | UnsetType = UNSET
    stages: Annotated[list[str], doc("the stages any rank has time in, in the tag format's order")] | UnsetType = UNSET
    ranks: list[RankRow] | UnsetType = UNSET
    median_us: float | UnsetType = UNSET
    slowest: Annotated[RankTime | None, doc("null when no rank has attention")] | UnsetType = UNSET
    fastest: RankTime | None | UnsetType = UNSET
    imbalance: Annotated[float | None, doc("the slowest rank's attention over the median's")] | UnsetType = UNSET
    odd_ranks: list[OddRank] | UnsetType = UNSET
    layers: list[LayerSpread] | UnsetType = UNSET
    headline: str | UnsetType = UNSET
    errors: Annotated[list[str], doc("the ranks' traces that failed, one message each")]


# ---- /sweeps and /sweep -----------------------------------------------------------------------

CellStatus = Literal["ok", "unsupported", "oom", "error"]


class SweepListed(Row, kw_only=True):
    """A directory holding a sweep.jsonl."""
    run: str
    size_bytes: int


class SweepsDoc(Row, kw_only=True):
    """GET /sweeps: every sweep of the logdir."""
    sweeps: list[SweepListed]
    scanned: bool


class SweepCell(Row, kw_only=True):
    """One cell of a sweep.jsonl line, the fields the view reads (plugin/sweeps.py): a field of the wrong
    type in the file is null here."""
    backend: str
    module: str | None
    dtype: str | None
    pass_: str | None = msgspec.field(name="pass")
    device: str | None
    device_name: str | None
    torch_version: str | None
    status: CellStatus
    reason: str | None
    cell_id: str | None
    profile_run: Annotated[str | None, doc("the run of this cell's profile, when the index lists it")]
    batch: int
    seq_len: int
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    median_s: float | None
    iqr_s: float | None
    mean_s: float | None
    peak_bytes: float | None
    flops: float | None
    tflops: float | None
    tokens_per_s: float | None
    pct_of_peak: float | None
    max_abs_error: float | None
    memory_cap_bytes: float | None
    number_per_run: float | None
    num_threads: float | None
    wall_time: float | None
    causal: bool | None
    samples: Annotated[Count, doc("timed blocks of the cell")]


class SweepFit(Row, kw_only=True):
    """Per backend and batch: the exponents of time and memory in seq_len (sweeps/analysis.py)."""
    backend: str
    batch: int
    time_exponent: float | None
    memory_exponent: float | None
    seq_lens: list[int]
    max_iqr_fraction: Annotated[float | None, doc("the noisiest cell's IQR / median")]
    few_sample_cells: Count


class SweepCrossover(Row, kw_only=True):
    """Where two backends trade places along seq_len."""
    batch: int
    backends: list[str]
    seq_len: float
    between: list[int]
    faster_below: str
    faster_above: str
    noisy_fraction: float | None
    noise_unknown: bool


class SweepBest(Row, kw_only=True):
    """The fastest backend of one batch × seq_len."""
    batch: int
    seq_len: int
    backend: str | None
    median_s: float | None
    runner_up: str | None
    speedup: float | None
    statuses: dict[str, CellStatus]
    unranked: Annotated[list[str], doc("backends timed fewer than three times here: shown, never ranked")]
    noisy_fraction: Annotated[float | None, doc(
        "IQR / median of the noisier of the two fastest cells, when above the noise mark")]


class SweepOom(Row, kw_only=True):
    """Per backend and batch: the longest seq_len that ran and the shortest that ran out of memory."""
    backend: str
    batch: int
    max_ok_seq_len: int | None
    min_oom_seq_len: int


class SweepAnalysis(Row, kw_only=True):
    """sweeps/analysis.py summarize."""
    cells: Count
    status_counts: dict[str, Count]
    fits: list[SweepFit]
    crossovers: list[SweepCrossover]
    best: list[SweepBest]
    oom_boundary: list[SweepOom]


class SweepConventions(Row, kw_only=True):
    """How the sweep measured (sweeps/conventions.py), in words."""
    flops: str
    timing: str
    peak_memory: Annotated[dict[str, str], doc("by device")]
    pct_of_peak: str


class SweepDoc(Row, kw_only=True):
    """GET /sweep: a sweep's cells and their analysis."""
    run: str
    cells: list[SweepCell]
    skipped_lines: Count
    skipped_notes: Annotated[list[str], doc("why lines were skipped, one note each; the first 20")]
    analysis: SweepAnalysis
    conventions: SweepConventions


# The answers route_types.ts is generated from, in the order a reader meets them.
ROOTS = (RunsDoc, KernelsDoc, CallAnswer, MemoryDoc, CompareDoc, RanksDoc, SweepsDoc, SweepDoc, LoadingAnswer,
         WaitingAnswer, ErrorAnswer)
