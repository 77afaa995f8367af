"""The report's layers: one row per attention layer, with its kernels, occupancy and why not flash."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .base import Pass, Row, Stage, doc


class StageRow(Row, kw_only=True):
    """Time of one stage and pass."""
    stage: Stage
    pass_: Pass = msgspec.field(name="pass")
    gpu_us: float
    cpu_us: float
    kernels: int
    launches: int


class Shape(Row, kw_only=True):
    """Attention's shape; null fields: unknown."""
    batch: int | None | UnsetType = UNSET
    q_heads: int | None | UnsetType = UNSET
    kv_heads: int | None | UnsetType = UNSET
    q_len: Annotated[int | None, doc("tokens")] | UnsetType = UNSET
    k_len: Annotated[int | None, doc("tokens")] | UnsetType = UNSET
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
    """Theoretical occupancy (reading/occupancy.py, CUDA rules) beside CUPTI's est. achieved occupancy."""
    name: str
    registers_per_thread: int | None
    shared_memory_bytes: Annotated[int | None, doc("per block")]
    block_threads: int | None
    configurations: Annotated[int, doc("distinct launch configurations of the kernel")]
    blocks_per_sm: int | None
    warps_per_sm: int | None
    max_warps_per_sm: int | None
    theoretical_pct: float | None
    limited_by: list[Literal["registers", "shared memory", "warps", "blocks"]]
    achieved_pct: Annotated[float | None, doc("the trace's est. achieved occupancy %, time-weighted over its non-zero "
                                              "launches: kineto computes it (theoretical blocks capped at grid / SMs), "
                                              "it is not measured")]
    launch_api: str | None
    reading: str
    min_grid_blocks: Annotated[int | None, doc("the smallest grid launched, in blocks")]
    small_grid_launches: Annotated[int, doc("launches with fewer blocks than the device has SMs (idle SMs)")]
    zero_estimates: Annotated[int, doc("launches whose est. achieved occupancy % reads 0")]
    zero_estimate_cause: Annotated[Literal["shared memory over the default limit", "idle SMs", "mixed", "unexplained"]
                                   | None, doc("why those read 0 (reading/occupancy.py zero_estimate_cause); "
                                               "null: none reads 0")]
    evidence_correlations: Annotated[list[int], doc("correlation ids of the first launches that read 0")]


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
    backend: Annotated[Literal["flash", "efficient", "cudnn", "flash_cpu"], doc("flash_cpu: the CPU's flash kernel, "
                                                                                "judged by the CPU's rules")]
    eligible: bool | None
    refusals: list[Refusal]
    unknown: list[UnknownCheck]


class WhyNotFlash(Row, kw_only=True):
    """PyTorch's SDPA backend checks (reading/eligibility_rules.py) replayed on the layer's first
    aten::scaled_dot_product_attention call."""
    device: str
    rules: str
    backends: list[BackendCheck]
    ran: str | None


class Layer(Row, kw_only=True):
    """One attention layer, over all its calls. Its fields are in the order the engine writes them
    (report/layers.py), so that a Layer encodes to the same bytes as the engine's row."""
    layer: str
    layer_type: str
    calls: int
    backend: str
    compiled: bool
    source: Literal["tag", "op", "module", "motif", "kernel"]
    shape: Shape | None
    dtype: str | None
    causal: bool | None
    dropout: Annotated[float | None, doc("probability")]
    mask: str | None
    flops: Annotated[float | None, doc("FLOPs of the calls whose time was recorded; null: shape unknown")]
    score_bytes: Annotated[int | None, doc("the largest score matrix of an unfused call")]
    memory_bytes: Annotated[int | None, doc("the largest peak growth of its calls (memory section)")]
    first_call: Annotated[int, doc("id of its first call")]
    heads: Annotated[Literal["MHA", "MQA", "GQA"], doc(
        "MQA: K/V have one head for all of Q's; GQA: fewer K/V heads than Q's (from K/V shapes, or a repeat_kv/"
        "repeat_interleave of K and V in the call: then shape.kv_heads is null); MHA: as many; absent: unknown")] | UnsetType = UNSET
    kernels: Annotated[list[LayerKernel], doc("the layer's kernels over all its calls, largest first (at most 100)")]
    implementation: Annotated[str, doc("its calls' implementations, most common first, joined by \"+\"")]
    gpu_us: float
    cpu_us: float
    stages: list[StageRow]
    tflops: Annotated[float | None, doc("TFLOP/s over its attention core's time (QKᵀ, scale/mask, softmax, dropout, AV, or the fused kernel: the projections and other work are not in it), not over the whole call's gpu_us/cpu_us")]
    gpu_unrecorded_calls: Annotated[int, Meta(ge=1), doc(
        "present when some of the layer's calls lost kernel launches (gpu_window): its gpu_us is a lower "
        "bound, and those calls' FLOPs are left out of flops/tflops")] | UnsetType = UNSET
    occupancy: list[KernelOccupancy]
    why_not_flash: Annotated[WhyNotFlash | None, doc(
        "null: no aten::scaled_dot_product_attention op with recorded shapes")]
    why_not_flash_unknown: Annotated[str | None, doc(
        "why why_not_flash is null (no SDPA op in the layer's calls, or it recorded no input shapes); "
        "null when it was read")]
