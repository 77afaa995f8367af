"""Which serving phase a name says, as data: one row per rule, with a real name and its public source.

phase: "prefill", "decode", "mixed" (prefill and decode in one launch), or "shape" (the op runs either
phase: its query length decides, 1 = decode). A call whose evidence says both prefill and decode is
mixed; a call with no evidence is "unknown", never guessed.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..format.linear_regex import FirstMatch, compile_linear


class PhaseRule(NamedTuple):
    on: str  # "kernel" (a kernel of the call) or "op" (an op inside the call)
    pattern: str  # re.search on the name
    phase: str
    example: str
    source: str


PHASE_RULES = (
    PhaseRule("kernel", r"PODWithKVCache", "mixed", "flashinfer::PODWithKVCacheTensorKernel<...>",
              "source: flashinfer-ai/flashinfer include/flashinfer/attention/pod.cuh (prefill and decode blocks in one kernel)"),
    PhaseRule("kernel", r"Prefill", "prefill", "flashinfer::BatchPrefillWithPagedKVCacheKernel<...>",
              "source: flashinfer-ai/flashinfer include/flashinfer/attention/prefill.cuh"),
    PhaseRule("kernel", r"Context", "prefill",
              "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
              "source: TensorRT-LLM / FlashInfer trtllm-gen FMHA kernels (context phase), as in attention/patterns.py's trtllm_fmha row"),
    PhaseRule("kernel", r"[Dd]ecode", "decode", "flashinfer::BatchDecodeWithPagedKVCacheKernel<...>",
              "source: flashinfer-ai/flashinfer include/flashinfer/attention/decode.cuh"),
    PhaseRule("kernel", r"paged_attention", "decode",
              "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(...)",
              "source: vllm-project/vllm csrc/attention/paged_attention_v2.cu (ROCm: paged_attention_ll4mi_QKV_mfma16_kernel, csrc/rocm/attention.cu)"),
    PhaseRule("kernel", r"masked_multihead_attention_kernel", "decode",
              "tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<...>",
              "source: NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention (generation phase)"),
    PhaseRule("kernel", r"^_fwd_(grouped_)?kernel_stage1$", "decode", "_fwd_grouped_kernel_stage1",
              "source: sgl-project/sglang python/sglang/srt/layers/attention/triton_ops/decode_attention.py"),
    PhaseRule("op", r"mha_batch_prefill|batch_prefill", "prefill", "aiter::mha_batch_prefill",
              "source: ROCm/aiter csrc/include/torch/mha_batch_prefill.h"),
    PhaseRule("op", r"flashinfer::\w*batch_decode", "decode",
              "flashinfer::batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_run",
              "source: flashinfer-ai/flashinfer python/flashinfer/decode.py (register_custom_op flashinfer::{uri}_run)"),
    PhaseRule("op", r"paged_attention", "decode", "_C::paged_attention_v2",
              "source: vllm-project/vllm csrc/torch_bindings.cpp (ops.def paged_attention_v2)"),
    PhaseRule("op", r"fwd_kvcache|flash_attn_with_kvcache", "shape", "_vllm_fa2_C::fwd_kvcache",
              "source: vllm-project/flash-attention (flash_attn_with_kvcache: q (batch, seqlen_q, heads, dim), used for "
              "decode and for prefill against a cache)"),
)


class QueryArgs(NamedTuple):
    """Where an op's recorded inputs hold its query: ``q`` the query's index in Input Dims (its first
    dimension is all the batch's query tokens), ``cu_seqlens_q`` the index of the cumulative lengths
    (N + 1 long for N sequences), ``max_seqlen_q`` the index in Concrete Inputs of the longest query;
    None where the op has no such input."""
    pattern: str
    q: int
    cu_seqlens_q: int | None
    max_seqlen_q: int | None
    example: str
    source: str


QUERY_ARGS = (
    QueryArgs(r"^_vllm_fa2_C::varlen_fwd$", 0, 4, 10, "_vllm_fa2_C::varlen_fwd",
              "source: vllm-project/flash-attention vllm_flash_attn/flash_attn_interface.py "
              "(torch.ops._vllm_fa2_C.varlen_fwd(q, k, v, out, cu_seqlens_q, cu_seqlens_k, seqused_k, None, "
              "block_table, alibi_slopes, max_seqlen_q, max_seqlen_k, ...); q (total_q, heads, head_dim))"),
    QueryArgs(r"^_vllm_fa3_C::fwd$", 0, 7, 12, "_vllm_fa3_C::fwd",
              "source: vllm-project/flash-attention vllm_flash_attn/flash_attn_interface.py (fa_version 3: "
              "torch.ops._vllm_fa3_C.fwd(q, k, v, k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k, "
              "cu_seqlens_k_new, seqused_q, seqused_k, max_seqlen_q, max_seqlen_k, block_table, ...))"),
    QueryArgs(r"^vllm::unified_attention(_with_output)?$", 0, None, None, "vllm::unified_attention_with_output",
              "source: vllm-project/vllm vllm/attention/layer.py (unified_attention_with_output(query, key, value, "
              "output, layer_name, ...): query (num_tokens, heads, head_size), every token of the batch; the "
              "Triton backend's kernel_unified_attention_2d/3d take cu_seqlens_q and max_seqlen_q as Python "
              "arguments no op records, so this op's token count is all the trace says)"),
)
_QUERY = FirstMatch([r.pattern for r in QUERY_ARGS])


@lru_cache(maxsize=1024)
def query_args_for(name: str) -> QueryArgs | None:
    """The QUERY_ARGS row of an op name, first row first (asked once per distinct name)."""
    i = _QUERY.index(name)
    return QUERY_ARGS[i] if i >= 0 else None


def is_query_op(name: str) -> bool:
    return _QUERY.any(name)


class PagedArgs(NamedTuple):
    """Where a paged decode op's recorded inputs hold its sizes: ``query`` the index in Input Dims of
    the query (num_seqs, q_heads, head_size), ``value_cache`` of the value cache (num_blocks, kv_heads,
    head_size, block_size), ``max_seq_len`` the index in Concrete Inputs of the longest sequence. Each
    sequence's length is a tensor's values (seq_lens) the profiler does not keep: the longest bounds them."""
    pattern: str
    query: int
    value_cache: int
    max_seq_len: int
    example: str
    source: str


PAGED_ARGS = (
    PagedArgs(r"^_C::paged_attention_v1$", 1, 3, 9, "_C::paged_attention_v1",
              "source: vllm-project/vllm csrc/ops.h (paged_attention_v1(out, query, key_cache, value_cache, "
              "num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len, ...); value_cache "
              "[num_blocks, num_kv_heads, head_size, block_size])"),
    PagedArgs(r"^_C::paged_attention_v2$|^_rocm_C::paged_attention$", 4, 6, 12, "_C::paged_attention_v2",
              "source: vllm-project/vllm csrc/ops.h (paged_attention_v2(out, exp_sums, max_logits, tmp_out, query, "
              "key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len, ...)); "
              "csrc/rocm/ops.h paged_attention takes the same arguments"),
)
_PAGED = FirstMatch([r.pattern for r in PAGED_ARGS])


@lru_cache(maxsize=256)
def paged_args_for(name: str) -> PagedArgs | None:
    i = _PAGED.index(name)
    return PAGED_ARGS[i] if i >= 0 else None


def is_paged_op(name: str) -> bool:
    return _PAGED.any(name)


# One pattern per kind says whether any row matches (most names match none); the rows' own patterns
# are compiled only when a name does (a report pays for the compiles it uses).
_ANY = {on: compile_linear("|".join(f"(?:{r.pattern})" for r in PHASE_RULES if r.on == on)) for on in ("kernel", "op")}
_COMPILED: list = []


@lru_cache(maxsize=8192)
def rules_for(on: str, name: str) -> tuple[PhaseRule, ...]:
    """The rows of ``on`` whose pattern the name matches, first row first (asked once per name: a
    trace repeats a few names over thousands of calls)."""
    if _ANY[on].search(name) is None:
        return ()
    if not _COMPILED:
        _COMPILED.extend((compile_linear(r.pattern), r) for r in PHASE_RULES)
    return tuple(r for rx, r in _COMPILED if r.on == on and rx.search(name))


def is_phase_op(name: str) -> bool:
    """Whether some op row matches the name (one search, for the op names of a whole trace)."""
    return _ANY["op"].search(name) is not None
