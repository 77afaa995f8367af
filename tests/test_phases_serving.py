"""Serving phases (issue 48) from a call's query lengths: vLLM's attention ops record how many query
tokens the batch holds, over how many sequences, and the longest query; one token per sequence is a
decode. The traces are built with the ops, argument layouts and kernel names vLLM V1 records (each
source named where it is used); no public kineto trace of vLLM, SGLang or TensorRT-LLM serving was
found to commit (tests/fixtures/serving/README.md says what was searched).

The truth of each call is the query lengths it was built with; a walker of this file reads the raw
events back to check the trace holds what vLLM's ops record.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import MLP, TraceBuilder

# vllm-project/vllm vllm/attention/layer.py: unified_attention_with_output(query, key, value, output, layer_name)
UA_OP = "vllm::unified_attention_with_output"
# vllm-project/flash-attention vllm_flash_attn/flash_attn_interface.py: torch.ops._vllm_fa2_C.varlen_fwd(q, k, v,
# out, cu_seqlens_q, cu_seqlens_k, seqused_k, None, block_table, alibi_slopes, max_seqlen_q, max_seqlen_k, ...)
FA2_OP = "_vllm_fa2_C::varlen_fwd"
# Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_kernel.h (vLLM builds it as vllm-flash-attn)
FA2_KERNEL = ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
              "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, true, false, false, "
              "false, true, true, false, false>(Flash_fwd_params)")
# vllm-project/vllm vllm/v1/attention/ops/triton_unified_attention.py (@triton.jit kernel_unified_attention_2d)
TRITON_UA_KERNEL = "kernel_unified_attention_2d"
HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16


def _fa2_call(b: TraceBuilder, i: int, qlens: list[int], kvlens: list[int]) -> None:
    """One layer's attention as vLLM V1's FlashAttention backend records it: the unified op, inside it
    varlen_fwd with the batch's query tokens, cu_seqlens_q (N + 1) and max_seqlen_q as a concrete int."""
    t, n = sum(qlens), len(qlens)
    start = b.t
    b.op(f"nn.Module: Attention_{i}", start, 100.0, cat="python_function")
    ua = b.op(UA_OP, start + 1, 95.0)
    ua["args"].update({"Input Dims": [[t, HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM],
                                      [t, HEADS, HEAD_DIM], []],
                       "Input type": ["c10::BFloat16"] * 4 + ["str"],
                       "Concrete Inputs": ["", "", "", "", f"model.layers.{i}.self_attn.attn"]})
    fa = b.op(FA2_OP, start + 3, 80.0)
    blocks = 4096
    dims = [[t, HEADS, HEAD_DIM], [blocks, BLOCK, KV_HEADS, HEAD_DIM], [blocks, BLOCK, KV_HEADS, HEAD_DIM],
            [t, HEADS, HEAD_DIM], [n + 1], [n + 1], [n], [], [n, max(kvlens) // BLOCK + 1], [], [], [], [], [], [],
            [], [], [], [], [], [], []]
    concrete = [""] * 10 + [str(max(qlens)), str(max(kvlens)), "0.", "0.088388", "False", "True", "-1", "-1",
                            "0.", "False", "0", ""]
    fa["args"].update({"Input Dims": dims, "Concrete Inputs": concrete})
    b.kernel(FA2_KERNEL, b.launch(start + 5), 40.0)
    b.t += 120
    for name, dur in MLP:
        b.kernel(name, b.launch(b.t), dur)
        b.t += 5


def _triton_call(b: TraceBuilder, i: int, tokens: int) -> None:
    """vLLM V1's Triton backend: the unified op holds only the batch's token count; its Triton kernel
    is launched with no op of its own (cu_seqlens_q and max_seqlen_q are Python arguments)."""
    start = b.t
    ua = b.op(UA_OP, start + 1, 60.0)
    ua["args"].update({"Input Dims": [[tokens, HEADS, HEAD_DIM], [tokens, KV_HEADS, HEAD_DIM],
                                      [tokens, KV_HEADS, HEAD_DIM], [tokens, HEADS, HEAD_DIM], []],
                       "Concrete Inputs": ["", "", "", "", f"model.layers.{i}.self_attn.attn"]})
    b.kernel(TRITON_UA_KERNEL, b.launch(start + 3, "cuLaunchKernel"), 30.0)
    b.t += 80


# ---- the walker: the raw events' query facts -----------------------------------------------------

def raw_query_facts(path) -> list[tuple[int, int | None, int | None]]:
    """(tokens, sequences, longest query) of each attention op, read from the raw JSON: the varlen op
    where there is one, else the unified op's query tokens alone."""
    evs = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    evs.sort(key=lambda e: e["ts"])
    out = []
    for e in evs:
        if e["name"] != UA_OP:
            continue
        inner = [f for f in evs if f["name"] == FA2_OP and e["ts"] <= f["ts"] < e["ts"] + e["dur"]]
        if inner:
            a = inner[0]["args"]
            out.append((a["Input Dims"][0][0], a["Input Dims"][4][0] - 1, int(a["Concrete Inputs"][10])))
        else:
            out.append((e["args"]["Input Dims"][0][0], None, None))
    return out


def truth(qlens: list[int]) -> str:
    ones = sum(1 for x in qlens if x == 1)
    return "decode" if ones == len(qlens) else "prefill" if ones == 0 else "mixed"


def phases_of(r: dict) -> dict[str, int]:
    return {p["phase"]: p["calls"] for p in r["overview"]["phases"]}


# ---- the batches --------------------------------------------------------------------------------

BATCHES = {
    "decode": [[1] * 8, [1] * 8],                      # 8 requests generating one token each
    "prefill": [[512, 300], [128]],                    # two prompts, then one prompt
    "mixed": [[1, 1, 1, 200], [64, 1, 1]],             # chunked prefill beside decodes (vLLM V1's default)
}


@pytest.mark.parametrize("kind", sorted(BATCHES))
def test_fa2_backend_batches_take_their_phase_from_query_lengths(tmp_path, kind):
    b = TraceBuilder()
    for i, qlens in enumerate(BATCHES[kind]):
        _fa2_call(b, i, qlens, [q + 700 for q in qlens])
    path = b.write(tmp_path / f"vllm_{kind}.json")
    facts = raw_query_facts(path)
    assert facts == [(sum(q), len(q), max(q)) for q in BATCHES[kind]]
    r = analyze_file(str(path))
    assert r["calls"] == len(BATCHES[kind])
    assert phases_of(r) == {kind: len(BATCHES[kind])}
    assert {truth(q) for q in BATCHES[kind]} == {kind}
    (row,) = r["overview"]["phases"]
    assert FA2_OP in row["evidence"][0]
    assert {s["phase"] for s in r["call_samples"]} == {kind}


def test_lengths_that_prove_nothing_say_unknown(tmp_path):
    """10 tokens over 3 sequences, the longest 5: (5, 3, 2) is all prefill, (5, 4, 1) is mixed; the
    trace cannot tell them apart, so no phase is claimed."""
    b = TraceBuilder()
    _fa2_call(b, 0, [5, 3, 2], [900, 900, 900])
    _fa2_call(b, 1, [5, 4, 1], [900, 900, 900])
    path = b.write(tmp_path / "vllm_ambiguous.json")
    assert raw_query_facts(path) == [(10, 3, 5), (10, 3, 5)]
    r = analyze_file(str(path))
    assert phases_of(r) == {"unknown": 2}


def test_triton_backend_one_token_is_decode_more_is_unknown(tmp_path):
    """The Triton backend's unified op says only its token count: one token is one sequence decoding;
    8 tokens may be 8 decodes or one 8-token prompt, so they stay unknown."""
    b = TraceBuilder()
    _triton_call(b, 0, 1)
    _triton_call(b, 1, 1)
    _triton_call(b, 2, 8)
    path = b.write(tmp_path / "vllm_triton.json")
    assert raw_query_facts(path) == [(1, None, None), (1, None, None), (8, None, None)]
    r = analyze_file(str(path))
    assert r["calls"] == 3
    assert phases_of(r) == {"decode": 2, "unknown": 1}


# ---- kernels replayed from a CUDA/HIP graph -------------------------------------------------------

def _family_example(family: str) -> str:
    from tb_attn_plugin.attention import patterns
    return next(f.example for f in patterns.KERNEL_FAMILIES if f.family == family)


@pytest.mark.parametrize("family,phase", [("vllm_paged_attention", "decode"), ("flashinfer_decode", "decode"),
                                          ("flashinfer_prefill", "prefill")])
def test_graph_replayed_kernels_keep_their_call_and_phase(tmp_path, family, phase):
    """vLLM and SGLang replay decode batches from one CUDA graph: every kernel's correlation points at one
    cudaGraphLaunch, no op around them. Each attention kernel is still its own call, with its phase."""
    b = TraceBuilder()
    kernel = _family_example(family)
    b.graph_replay([[(kernel, 25.0)]] * 4, between=MLP)
    path = b.write(tmp_path / "graph.json")
    evs = json.loads(path.read_text())["traceEvents"]
    (launch,) = [e for e in evs if e["name"] == "cudaGraphLaunch"]
    replayed = [e for e in evs if e.get("cat") == "kernel" and e["name"] == kernel]
    assert len(replayed) == 4 and all(e["args"]["correlation"] == launch["args"]["correlation"] for e in replayed)
    r = analyze_file(str(path))
    assert r["calls"] == 4
    assert phases_of(r) == {phase: 4}
    assert {s["phase"] for s in r["call_samples"]} == {phase}


def test_hip_graph_replay_keeps_its_calls_on_the_shared_flux_trace():
    """TraceLens's FLUX.1 capture (MI300X): 57 aiter fmha kernels replayed from its one hipGraphLaunch
    are 57 calls, each with a phase (unknown: a diffusion model's attention says no serving phase)."""
    import gzip

    from tests.conftest import shared_trace
    path = shared_trace("tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")
    evs = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    (launch,) = [e for e in evs if e["name"] == "hipGraphLaunch"]
    replayed = [e for e in evs if e.get("cat") == "kernel" and e["name"].startswith("aiter::fmha_fwd")
                and (e.get("args") or {}).get("correlation") == launch["args"]["correlation"]]
    assert len(replayed) == 57
    r = analyze_file(str(path))
    ck = [i for i in r["implementations"] if i["implementation"] == "ck"]
    assert sum(i["calls"] for i in ck) == len(replayed)
    assert sum(p["calls"] for p in r["overview"]["phases"]) == r["calls"]
    assert phases_of(r) == {"unknown": r["calls"]}


# ---- stages and roofline per phase; a decode judged on its KV cache -------------------------------

# PyTorch's flash kernel (the pytorch_flash_fwd row of attention/patterns.py, trace tl_h100_bert_small_sdpa_flash)
SDPA_FLASH_KERNEL = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, "
                     "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
                     "cutlass::bfloat16_t> >, false, true, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)")


def _sdpa_call(b: TraceBuilder, i: int, q: list[int], kv: list[int], us: float) -> None:
    """Hugging Face's attention through SDPA on a GPU (flash backend), its query and cached keys recorded
    as Input Dims [batch, heads, length, head_dim], bf16."""
    start = b.t
    b.op(f"nn.Module: LlamaAttention_{i}", start, us + 40, cat="python_function")
    op = b.op("aten::scaled_dot_product_attention", start + 1, us + 30)
    op["args"].update({"Input Dims": [q, kv, kv, [], [], [], []],
                       "Input type": ["c10::BFloat16"] * 3 + ["", "Scalar", "Scalar", ""],
                       "Concrete Inputs": ["", "", "", "", "0.", "False", ""]})
    inner = b.op("aten::_scaled_dot_product_flash_attention", start + 2, us + 20)
    inner["args"].update({"Input Dims": [q, kv, kv, [], [], [], []],
                          "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", "Scalar", ""]})
    b.kernel(SDPA_FLASH_KERNEL, b.launch(start + 4), us)
    b.t += us + 60


def sdpa_facts(path) -> list[dict]:
    """Each SDPA op's query and key dims from the raw events, and the bytes of K and V it names (bf16)."""
    out = []
    for e in json.loads(path.read_text())["traceEvents"]:
        if e["name"] == "aten::scaled_dot_product_attention":
            (b, h, lq, d), (_, hkv, lk, _) = e["args"]["Input Dims"][:2]
            out.append({"lq": lq, "lk": lk, "kv_bytes": 2 * b * hkv * lk * d * 2, "flops": 4 * b * h * lq * lk * d})
    return out


def test_decode_roofline_reads_the_kv_cache_and_is_memory_bound(tmp_path):
    """Four decode calls (one query token against 4,096 cached keys, batch 8) beside two prompts of 4,096
    tokens on an H100: the decode point's bytes are the KV cache read (2 · 8 · 32 · 4096 · 128 · 2 B per
    call), 1 FLOP per byte: memory-bound; the prompts (no evidence of a phase: unknown) are compute-bound."""
    b = TraceBuilder()
    for i in range(4):
        _sdpa_call(b, i, [8, 32, 1, 128], [8, 32, 4096, 128], 220.0)
    for i in range(2):
        _sdpa_call(b, 4 + i, [1, 32, 4096, 128], [1, 32, 4096, 128], 700.0)
    path = b.write(tmp_path / "hf_decode.json")
    facts = sdpa_facts(path)
    decode = [f for f in facts if f["lq"] == 1]
    assert len(decode) == 4
    r = analyze_file(str(path))
    rows = {p["phase"]: p for p in r["overview"]["phases"]}
    assert set(rows) == {"decode", "unknown"} and rows["decode"]["calls"] == 4
    point = rows["decode"]["roofline"]
    assert point["bytes_are"] == "kv_cache_read" and point["calls"] == 4
    assert point["bytes"] == sum(f["kv_bytes"] for f in decode)
    assert point["flops"] == sum(f["flops"] for f in decode)
    assert point["time_us"] == pytest.approx(4 * 220.0)
    assert point["bound"] == "memory"
    assert point["achieved_tbs"] == pytest.approx(point["bytes"] / (point["time_us"] * 1e-6) / 1e12, rel=1e-3)
    assert rows["unknown"]["roofline"]["bound"] == "compute"
    assert rows["unknown"]["roofline"]["bytes_are"] == "stage_model"
    # stages per phase: each phase's stage times add up to its attention time
    for ph in ("decode", "unknown"):
        assert sum(s["gpu_us"] for s in rows[ph]["stages"]) == pytest.approx(rows[ph]["gpu_us"])
    assert rows["decode"]["stages"][0]["stage"] == "fused"
    assert "KV cache read" in r["overview"]["phase_convention"]


def test_text_says_the_phase_roofline(tmp_path):
    from tb_attn_plugin.report.text import render
    b = TraceBuilder()
    for i in range(2):
        _sdpa_call(b, i, [8, 32, 1, 128], [8, 32, 4096, 128], 220.0)
    r = analyze_file(str(b.write(tmp_path / "hf_decode.json")))
    text = render(r)
    mb = 2 * (2 * 8 * 32 * 4096 * 128 * 2) / 1e6
    assert f"KV cache read {mb:.4g} MB" in text and "memory-bound" in text
    assert "decode: fused fwd" in text


def test_cpu_recorded_decode_loop_reads_its_kv_cache(tmp_path):
    """A KV-cache generation loop as Hugging Face runs one through SDPA, recorded on the CPU with
    record_shapes: a 16-token prompt, then three decode steps against caches of 17, 18 and 19 keys
    (batch 2, 4 heads, head_dim 32, float32). The decode point's bytes are the caches read, re-derived
    from the raw ops' Input Dims; its time is the decode calls' CPU time (the report's time basis)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    k = torch.randn(2, 4, 16, 32)
    path = tmp_path / "generate.pt.trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.scaled_dot_product_attention(torch.randn(2, 4, 16, 32), k, k, is_causal=True)
        for _ in range(3):
            k = torch.cat([k, torch.randn(2, 4, 1, 32)], dim=2)
            F.scaled_dot_product_attention(torch.randn(2, 4, 1, 32), k, k)
    prof.export_chrome_trace(str(path))
    decode = []
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("name") == "aten::scaled_dot_product_attention":
            (b, h, lq, d), (_, hkv, lk, _) = e["args"]["Input Dims"][:2]
            if lq == 1:
                decode.append((2 * b * hkv * lk * d * 4, 4 * b * h * lq * lk * d))
    assert len(decode) == 3
    r = analyze_file(str(path))
    rows = {p["phase"]: p for p in r["overview"]["phases"]}
    assert rows["decode"]["calls"] == 3
    point = rows["decode"]["roofline"]
    assert point["bytes_are"] == "kv_cache_read" and point["calls"] == 3
    assert point["bytes"] == sum(x for x, _ in decode) == 2 * 2 * 4 * 32 * 4 * (17 + 18 + 19)
    assert point["flops"] == sum(f for _, f in decode)
    assert point["time_us"] == pytest.approx(rows["decode"]["cpu_us"], abs=0.01)
    assert sum(s["cpu_us"] for s in rows["decode"]["stages"]) == pytest.approx(rows["decode"]["cpu_us"], abs=0.01)


# ---- vLLM V1 on Hopper (FA3): the kernel names of a real vLLM trace -----------------------------
# sgl-project/sglang .claude/skills/llm-torch-profiler-analysis/references/validated_outputs/
# 20260422_h100_qwen3_matrix/qwen3_30b_a3b/analysis_vllm_input.txt @9d0fa75 (a vLLM H100 trace of Qwen3-30B-A3B):
# the FA3 kernels run 97% from cudaGraphLaunch (decode batches in a full CUDA graph) and 3% from
# _vllm_fa3_C::fwd (eager batches).
FA3_KERNEL = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
              "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, 128, "
              "cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, true, false, false, true, true, true, "
              "true, false, cutlass::bfloat16_t, 1>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<64>, cute::C<128>, "
              "cute::C<128> >, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, cutlass::arch::Sm90, 128, "
              "true, true, true, false, 1>, flash::VarlenDynamicPersistentTileScheduler<64, 128, 128, 128, true, true, true, "
              "true, false, true> > > >")
FA3_COMBINE = ("void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 5, 256, 1, false, "
               "true, cutlass::bfloat16_t, float, cutlass::arch::Sm90> >")
# vllm-project/flash-attention vllm_flash_attn/flash_attn_interface.py (fa_version 3): _vllm_fa3_C.fwd(q, k, v,
# k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k, cu_seqlens_k_new, seqused_q, seqused_k, max_seqlen_q, ...)
FA3_OP = "_vllm_fa3_C::fwd"


def _fa3_call(b: TraceBuilder, i: int, qlens: list[int]) -> None:
    t, n = sum(qlens), len(qlens)
    start = b.t
    ua = b.op(UA_OP, start + 1, 95.0)
    ua["args"].update({"Input Dims": [[t, HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM],
                                      [t, HEADS, HEAD_DIM], []]})
    fa = b.op(FA3_OP, start + 3, 80.0)
    dims = [[t, HEADS, HEAD_DIM], [4096, BLOCK, KV_HEADS, HEAD_DIM], [4096, BLOCK, KV_HEADS, HEAD_DIM], [], [], [],
            [t, HEADS, HEAD_DIM], [n + 1], [], [], [], [n], [], [], [n, 64]] + [[]] * 22
    concrete = [""] * 12 + [str(max(qlens)), "1024"] + [""] * 23
    fa["args"].update({"Input Dims": dims, "Concrete Inputs": concrete})
    b.kernel(FA3_KERNEL, b.launch(start + 5), 30.0)
    b.kernel(FA3_COMBINE, b.launch(start + 8), 4.0)
    b.t += 120


def test_vllm_fa3_eager_batches_by_query_lengths_graph_replays_unknown(tmp_path):
    """Eager FA3 batches take their phase from _vllm_fa3_C::fwd's inputs; the same kernels replayed from
    a CUDA graph have no op and no name that says a phase: unknown, not guessed."""
    b = TraceBuilder()
    _fa3_call(b, 0, [1] * 16)           # 16 decodes
    _fa3_call(b, 1, [1, 1, 1, 512])     # a prompt chunk beside 3 decodes
    _fa3_call(b, 2, [256, 300])         # two prompts
    b.graph_replay([[(FA3_KERNEL, 12.0), (FA3_COMBINE, 3.0)]] * 3, between=MLP)
    path = b.write(tmp_path / "vllm_fa3.json")
    evs = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in evs if e["name"] == FA3_OP]
    facts = [(e["args"]["Input Dims"][0][0], e["args"]["Input Dims"][7][0] - 1, int(e["args"]["Concrete Inputs"][12]))
             for e in ops]
    assert facts == [(16, 16, 1), (515, 4, 512), (556, 2, 300)]
    (launch,) = [e for e in evs if e["name"] == "cudaGraphLaunch"]
    assert sum(1 for e in evs if e.get("cat") == "kernel" and e["name"] == FA3_KERNEL
               and e["args"]["correlation"] == launch["args"]["correlation"]) == 3
    r = analyze_file(str(path))
    assert r["calls"] == 6
    assert phases_of(r) == {"decode": 1, "mixed": 1, "prefill": 1, "unknown": 3}


def test_query_args_rows_name_a_real_op_and_its_source():
    """Each QUERY_ARGS row (overview/phase_rules.py) matches its own example and names its public source."""
    from tb_attn_plugin.overview import phase_rules as R
    for row in R.QUERY_ARGS:
        assert R.query_args_for(row.example) is row
        assert row.source.startswith("source: ") and "/" in row.source
    assert R.query_args_for("aten::scaled_dot_product_attention") is None


def test_a_phase_without_shapes_says_its_roofline_is_unknown(tmp_path):
    """vLLM's paged calls record the batch's token counts, not each sequence's key length (a tensor's
    values): no KV cache size, so no roofline point, said rather than guessed."""
    from tb_attn_plugin.report.text import render
    b = TraceBuilder()
    _fa3_call(b, 0, [1] * 16)
    r = analyze_file(str(b.write(tmp_path / "fa3_decode.json")))
    (row,) = r["overview"]["phases"]
    assert row["phase"] == "decode" and row["roofline"] is None
    assert "roofline: unknown (no call of this phase recorded its query and key shapes" in render(r)


# ---- the reading (expected against ran, extras, host) per phase -----------------------------------
# vllm-project/vllm csrc/cache_kernels.cu: the KV-cache write each layer launches before attention
CACHE_KERNEL = ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
                "(vllm::Fp8KVCacheDataType)0>(long const*)")
# Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h: the split-KV combine that
# vLLM's FA2 runs after flash_fwd_splitkv_kernel when a short query meets a long cache (a decode)
COMBINE_KERNEL = ("void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
                  "false, cutlass::bfloat16_t>, 4, 5, true>(Flash_fwd_params)")
READ_BATCHES = [[1] * 8, [512, 300], [1, 1, 1, 200], [1] * 4, [128], [1] * 16]


def _served_call(b: TraceBuilder, i: int, qlens: list[int]) -> None:
    """vLLM V1's FA2 backend with its KV-cache write; a decode batch (every query 1 token) also runs the
    split-KV combine."""
    t, n = sum(qlens), len(qlens)
    start = b.t
    b.op(f"nn.Module: Attention_{i}", start, 100.0, cat="python_function")
    ua = b.op(UA_OP, start + 1, 90.0 + 2 * i)
    ua["args"].update({"Input Dims": [[t, HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM], [t, KV_HEADS, HEAD_DIM],
                                      [t, HEADS, HEAD_DIM], []]})
    b.kernel(CACHE_KERNEL, b.launch(start + 2), 3.0 + i)
    fa = b.op(FA2_OP, start + 3, 80.0)
    dims = [[t, HEADS, HEAD_DIM], [4096, BLOCK, KV_HEADS, HEAD_DIM], [4096, BLOCK, KV_HEADS, HEAD_DIM],
            [t, HEADS, HEAD_DIM], [n + 1], [n + 1], [n], [], [n, 64]] + [[]] * 13
    fa["args"].update({"Input Dims": dims, "Concrete Inputs": [""] * 10 + [str(max(qlens)), "1024"] + [""] * 10})
    b.kernel(FA2_KERNEL, b.launch(start + 5), 30.0 + 5 * i)
    if max(qlens) == 1:
        b.kernel(COMBINE_KERNEL, b.launch(start + 7), 6.0)
    b.t += 120
    for name, dur in MLP:
        b.kernel(name, b.launch(b.t), dur)
        b.t += 5


def raw_reading_by_phase(path) -> dict[str, dict]:
    """Per phase, from the raw events alone: each unified op is a call; its phase from its varlen op's
    recorded lengths (every query 1 token = decode, none = prefill, else mixed, which these batches
    decide); its kernels those whose launch lies inside the op; the combine and the cache write are
    its extras (what each is, by name); host time the unified op's duration."""
    evs = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in evs if e.get("cat") == "cuda_runtime"}
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    out: dict[str, dict] = {}
    for ua in (e for e in ops if e["name"] == UA_OP):
        lo, hi = ua["ts"], ua["ts"] + ua["dur"]
        (fa,) = [f for f in ops if f["name"] == FA2_OP and lo <= f["ts"] < hi]
        t, n, m = (fa["args"]["Input Dims"][0][0], fa["args"]["Input Dims"][4][0] - 1,
                   int(fa["args"]["Concrete Inputs"][10]))
        phase = "decode" if m == 1 else "prefill" if t > 1 + (n - 1) * m else "mixed"
        ks = [k for k in kernels if lo <= launch_ts[k["args"]["correlation"]] < hi]
        row = out.setdefault(phase, {"calls": 0, "ran": [], "host": 0.0, "gpu": 0.0,
                                     "split_kv_reduce": [0, 0.0], "kv_cache_write": [0, 0.0]})
        row["calls"] += 1
        row["ran"].append(len(ks))
        row["host"] += ua["dur"]
        row["gpu"] += sum(k["dur"] for k in ks)
        for k in ks:
            cause = ("split_kv_reduce" if "splitkv_combine" in k["name"] else
                     "kv_cache_write" if "reshape_and_cache" in k["name"] else None)
            if cause:
                row[cause][0] += 1
                row[cause][1] += k["dur"]
    return out


def test_reading_per_phase_matches_the_raw_events(tmp_path):
    """Six vLLM layers (three decode batches, two prompts, one chunked prefill beside decodes) in one
    trace: the reading over all of them averages a decode's split-KV combine into 0.5 per call; per phase,
    each phase's counts, extras and host and GPU time per call are what the raw events hold."""
    b = TraceBuilder()
    for i, qlens in enumerate(READ_BATCHES):
        _served_call(b, i, qlens)
    path = b.write(tmp_path / "vllm_served.json")
    raw = raw_reading_by_phase(path)
    assert {ph: v["calls"] for ph, v in raw.items()} == {"decode": 3, "prefill": 2, "mixed": 1}
    assert {ph: v["calls"] for ph, v in raw.items()} == Counter(truth(q) for q in READ_BATCHES)
    r = analyze_file(str(path))
    (row,) = r["reading"]
    assert row["calls"] == 6
    assert [p["phase"] for p in row["phases"]] == ["prefill", "decode", "mixed"]  # overview/phases.py's order
    assert sum(p["calls"] for p in row["phases"]) == row["calls"]
    whole = {x["cause"]: x for x in row["expected"]["extras"]}
    assert whole["split_kv_reduce"]["per_call"] == 0.5
    for p in row["phases"]:
        want, e, h = raw[p["phase"]], p["expected"], p["host"]
        n = want["calls"]
        assert p["calls"] == n
        assert (e["ran_min"], e["ran_max"]) == (min(want["ran"]), max(want["ran"]))
        assert e["expected"] == 1  # one fused kernel per forward (expectations.py), whatever the phase
        extras = {x["cause"]: x for x in e["extras"]}
        for cause in ("split_kv_reduce", "kv_cache_write"):
            cnt, us = want[cause]
            if not cnt:
                assert cause not in extras
                continue
            assert extras[cause]["per_call"] == pytest.approx(cnt / n, abs=1e-3)
            assert extras[cause]["us_per_call"] == pytest.approx(us / n, abs=1e-3)
        assert h["host_us_per_call"] == pytest.approx(want["host"] / n, abs=1e-3)
        assert h["gpu_us_per_call"] == pytest.approx(want["gpu"] / n, abs=1e-3)
    # the report is a Report (format/report/: ReadingRow.phases, strict types)
    import msgspec

    from tb_attn_plugin.format.report import Report
    msgspec.json.decode(msgspec.json.encode(r), type=Report, strict=True)
    # the Reading panel of one call (reading/call.py) carries its own phase's reading
    from tb_attn_plugin.reading.call import panel
    for sample in r["call_samples"]:
        got = panel(r, sample)
        assert got["phase"] == sample["phase"] and got["phase_reading"]["phase"] == sample["phase"]
        assert got["phase_reading"]["calls"] == raw[sample["phase"]]["calls"]
    from tb_attn_plugin.report.text import render
    text = render(r)
    assert "    decode · 3 calls: expected 1 kernels per forward, ran 3: +1 split kv reduce" in text
    assert "    prefill · 2 calls: expected 1 kernels per forward, ran 2: +1 kv cache write" in text


def test_one_phase_keeps_the_reading_whole(tmp_path):
    """Every call a decode: one phase, so the reading is not split (nor a trace of unknown phases)."""
    b = TraceBuilder()
    for i in range(3):
        _served_call(b, i, [1] * 8)
    r = analyze_file(str(b.write(tmp_path / "vllm_decode.json")))
    assert phases_of(r) == {"decode": 3}
    assert all("phases" not in row for row in r["reading"])
    from tb_attn_plugin.reading.call import panel
    got = panel(r, r["call_samples"][0])
    assert got["phase"] == "decode" and got["phase_reading"] is None


# ---- vLLM's paged decode: a roofline point on the KV cache it reads, bounded by the longest sequence ----
PAGED_OP = "_C::paged_attention_v2"  # vllm-project/vllm csrc/ops.h, csrc/torch_bindings.cpp
PAGED_KERNEL = ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
                "(vllm::Fp8KVCacheDataType)0, false, 512>(float*, float*, __nv_bfloat16*, __nv_bfloat16 const*, "
                "__nv_bfloat16 const*, __nv_bfloat16 const*, int, float, int const*, int const*, int, float const*, "
                "int, int, int, float const*, float const*, int, int, int)")
PAGED_REDUCE = ("void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*, "
                "float const*, float const*, __nv_bfloat16 const*, int const*, int)")


def _paged_call(b: TraceBuilder, i: int, seqs: int, longest: int, us: float) -> None:
    """vLLM's paged decode as csrc/ops.h declares it: paged_attention_v2(out, exp_sums, max_logits, tmp_out,
    query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
    alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank, ...); the caches [blocks, kv_heads, ...]."""
    start = b.t
    b.op(f"nn.Module: LlamaAttention_{i}", start, us + 40, cat="python_function")
    op = b.op(PAGED_OP, start + 1, us + 30)
    parts = longest // 512 + 1
    bf = "c10::BFloat16"
    op["args"].update({
        "Input Dims": [[seqs, HEADS, HEAD_DIM], [seqs, HEADS, parts], [seqs, HEADS, parts],
                       [seqs, HEADS, parts, HEAD_DIM], [seqs, HEADS, HEAD_DIM], [4096, KV_HEADS, HEAD_DIM // 8, BLOCK, 8],
                       [4096, KV_HEADS, HEAD_DIM, BLOCK], [], [], [seqs, longest // BLOCK + 1], [seqs], [], [], [], [],
                       [], [], [], [], [], [], []],
        "Input type": [bf, "float", "float", bf, bf, bf, bf, "Int", "Double", "int", "int", "Int", "Int", "", "str",
                       "float", "float", "Int", "Int", "Int", "Int", "Int"],
        "Concrete Inputs": ["", "", "", "", "", "", "", str(KV_HEADS), "0.088388", "", "", str(BLOCK), str(longest),
                            "", "auto", "", "", "0", "0", "0", "64", "0"]})
    b.kernel(PAGED_KERNEL, b.launch(start + 3), us)
    b.kernel(PAGED_REDUCE, b.launch(start + 5), 5.0)
    b.t += us + 60


def raw_paged_facts(path) -> list[dict]:
    """Per paged op, from the raw events: sequences, query heads, head size, KV heads, the longest
    sequence, and the KV cache bytes if every sequence were that long (bf16)."""
    out = []
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("name") == PAGED_OP:
            dims, conc = e["args"]["Input Dims"], e["args"]["Concrete Inputs"]
            (n, hq, d), hkv, longest = dims[4], dims[6][1], int(conc[12])
            out.append({"n": n, "bytes": 2 * n * hkv * longest * d * 2, "flops": 4 * n * hq * longest * d,
                        "intensity": 2 * hq / hkv / 2})
    return out


@pytest.mark.parametrize("seqs,bytes_are", [(1, "kv_cache_read"), (8, "kv_cache_read_at_most")])
def test_paged_decode_roofline_on_the_kv_cache(tmp_path, seqs, bytes_are):
    """Three paged decodes over caches of up to 2,048 tokens: one sequence per call reads exactly its
    cache; eight read at most eight times the longest (seq_lens' values are not recorded). Either way
    the intensity, 2 · 32 / 8 / 2 = 4 FLOP/B, is below an H100's ridge: memory-bound."""
    b = TraceBuilder()
    for i in range(3):
        _paged_call(b, i, seqs, 2048, 200.0)
    path = b.write(tmp_path / "vllm_paged.json")
    facts = raw_paged_facts(path)
    assert len(facts) == 3 and {f["n"] for f in facts} == {seqs}
    r = analyze_file(str(path))
    (row,) = r["overview"]["phases"]
    assert row["phase"] == "decode" and row["calls"] == 3
    point = row["roofline"]
    assert point["bytes_are"] == bytes_are and point["calls"] == 3
    assert point["bytes"] == sum(f["bytes"] for f in facts)
    assert point["flops"] == sum(f["flops"] for f in facts)
    assert point["intensity"] == facts[0]["intensity"] == 4
    assert point["time_us"] == pytest.approx(3 * (200.0 + 5.0))
    assert point["bound"] == "memory"
    import msgspec

    from tb_attn_plugin.format.report import Report
    msgspec.json.decode(msgspec.json.encode(r), type=Report, strict=True)
    from tb_attn_plugin.report.text import render
    what = "KV cache read at most" if seqs > 1 else "KV cache read"
    assert f"roofline (3 calls with shapes): {what} {point['bytes'] / 1e6:.4g} MB" in render(r)
    assert ("kv_cache_read_at_most" in r["overview"]["phase_convention"]) == (seqs > 1)


def test_paged_args_rows_name_a_real_op_and_its_source():
    from tb_attn_plugin.overview import phase_rules as R
    for row in R.PAGED_ARGS:
        assert R.paged_args_for(row.example) is row
        assert row.source.startswith("source: ") and "/" in row.source
    assert R.paged_args_for(FA3_OP) is None
