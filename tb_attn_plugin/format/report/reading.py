"""The report's reading sections: expected against actual kernels, the host's cost, kernel names decoded."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from msgspec import UNSET, UnsetType

from .base import Count, NonNeg, Positive, Row, doc


class Evidence(Row, kw_only=True):
    """The raw events that earned a claim: the first few, to find them in the trace."""
    kernel_correlations: Annotated[list[int], doc("kernels' correlation ids (GPU trace)")]
    op_starts_us: Annotated[list[float], doc("ops' ts as the trace records it, µs (CPU trace)")]


class Extra(Row, kw_only=True):
    """Kernels beyond the expected ones, by cause."""
    cause: Literal["hidden_copy", "mask_built_per_call", "safe_softmax_guard", "dtype_cast", "layout_copy",
                   "buffer_fill", "repeated_step", "unexplained", "kv_cache_write", "quantize", "split_kv_reduce",
                   "preprocess", "postprocess", "mha_fast_path", "attention_weights"]
    step: str | None
    what: str
    per_call: Annotated[NonNeg, doc("kernels (CPU: ops) per call")]
    us_per_call: NonNeg
    us_per_step: NonNeg | None
    names: list[str]
    fix: str
    source: str
    evidence: Evidence


class Flag(Row, kw_only=True):
    """A kernel that runs as expected but slower than it could (an fp32 GEMM)."""
    flag: Literal["fp32_gemm"]
    what: str
    per_call: NonNeg
    us_per_call: NonNeg
    names: list[str]
    fix: str
    source: str
    evidence: Evidence


class Outside(Row, kw_only=True):
    """Kernels launched inside the call that belong to no stage."""
    per_call: NonNeg
    us_per_call: NonNeg
    names: list[str]


class Expected(Row, kw_only=True):
    """Expected against actual kernels per forward (reading/expected.py, expectations.py)."""
    unit: Annotated[Literal["kernels", "ops"], doc("GPU kernels, or on a CPU trace the ops that do work")]
    expected: Annotated[Count | None, doc("units per forward the implementation needs; null: unknown (reason_unknown)")]
    expected_steps: list[str] | None
    reason_unknown: str | None
    ran: Annotated[Count, doc("units per forward that most calls ran")]
    ran_min: Count
    ran_max: Count
    extras: list[Extra]
    flags: list[Flag]
    transposes: Annotated[Count | None, doc("aten::transpose ops inside the attention op (metadata only, no kernel), "
                                            "as most calls ran them; null: no attention op")]
    transposes_expected: Count | None
    outside: Outside
    source: str
    summary: str
    calls_without_forward: Annotated[Count, doc("calls whose GPU forward the trace lacks (a cut window, a backward-only "
                                                "call): left out of every figure above")]


class LaunchApi(Row, kw_only=True):
    """A runtime API called per call."""
    name: str
    per_call: NonNeg
    note: str
    source: str


class HostCost(Row, kw_only=True):
    """The cost on the host per call (reading/host_cost.py)."""
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
    cpu_only: bool = False  # the trace recorded no GPU at all: the ops' own time is the computation, not dispatch (False in reports made before it)
    summary: str


class PhaseReading(Row, kw_only=True):
    """The same reading over the calls of one serving phase (overview/phases.py)."""
    phase: Literal["prefill", "decode", "mixed", "unknown"]
    calls: Positive
    expected: Expected | None
    host: HostCost | None


class ReadingRow(Row, kw_only=True):
    """A layer type × implementation read the way 'Attention is all you profile' reads a call."""
    layer_type: str
    implementation: str
    calls: Positive
    expected: Expected | None
    host: Annotated[HostCost | None, doc("null for calls with no host side (graph replay only)")]
    phases: Annotated[list[PhaseReading], doc("the reading per serving phase, prefill first; only where the "
                                              "trace's calls have two phases or more")] | UnsetType = UNSET


class Fingerprint(Row, kw_only=True):
    """A kernel name decoded by reading/fingerprint_rules.py; null fields: no rule matched (unknown)."""
    summary: str
    flags: list[str]
    library: str | None
    pass_: str | None = msgspec.field(name="pass")
    dtype: str | None
    math_unit: str | None
    tile: str | None
    layout: str | None
    arch: str | None
    head_dim: str | None
    paging: str | None
    causal: str | None
    knob: str | None
    split: str | None


class KernelReading(Row, kw_only=True):
    """reading/section.py: each distinct kernel name of attention, decoded once; what occupancy could be read."""
    device_arch: str | None
    occupancy: str
    fingerprints: Annotated[dict[str, Fingerprint], doc("by kernel name")]
