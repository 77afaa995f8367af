"""The report's ``reading``: expected against actual kernels per call, and the cost on the host, read
the way "Attention is all you profile" (huggingface/blog torch-attention-profile.md) reads its six
variants. CPU traces of the post's variants are recorded here (demo/post.py); GPU facts come from
../shared/traces, and the post's full table from tests/fixtures/gpu/post/ once a GPU recorded it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tb_attn_plugin.reading import expectations as X
from tb_attn_plugin.reading import host_cost
from tb_attn_plugin.reading.expected import _cause
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace.discover import find_traces
from tests.conftest import REPO, shared_trace

POST_GPU = REPO / "tests" / "fixtures" / "gpu" / "post"


@pytest.fixture(scope="module")
def post_cpu(tmp_path_factory) -> dict[str, dict]:
    """The report of each of the post's CPU variants, recorded by ``python -m demo --post``."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    out = tmp_path_factory.mktemp("post")
    subprocess.run([sys.executable, "-m", "demo", "--post", "--lengths", "32", "--logdir", str(out)], cwd=REPO,
                   check=True, timeout=300, capture_output=True)
    return {t.run[len("post-"):].rsplit("-L", 1)[0]: analyze_file(t.path) for t in find_traces(str(out))}


def _row(report: dict, implementation: str) -> dict:
    (row,) = [g for g in report["reading"] if g["implementation"] == implementation]
    return row


def _extras(row: dict) -> dict[str, dict]:
    return {x["cause"]: x for x in row["expected"]["extras"]}


def test_post_cpu_variants_are_the_four_the_cpu_runs(post_cpu):
    assert sorted(post_cpu) == ["naive", "naive-inplace", "sdpa", "sdpa-math"]


def test_naive_out_of_place_names_the_hidden_copy_and_its_cost(post_cpu):
    e = _row(post_cpu["naive"], "eager")["expected"]
    assert e["unit"] == "ops"  # a CPU trace: ops that do work stand for kernels
    assert e["expected"] == 5 and e["expected_steps"] == ["qk_matmul", "scale", "mask", "softmax", "av_matmul"]
    assert e["ran"] == 6  # the post's 6: one more than expected
    copy = _extras(_row(post_cpu["naive"], "eager"))["hidden_copy"]
    assert copy["per_call"] == 1 and copy["names"] == ["aten::copy_"]
    assert copy["us_per_call"] > 0 and copy["us_per_step"] == copy["us_per_call"]  # one call per step
    assert "masked_fill_" in copy["fix"] and copy["source"].startswith("blog:")
    assert "ran 6: +1 hidden copy" in e["summary"]


def test_naive_inplace_has_no_hidden_copy(post_cpu):
    row = _row(post_cpu["naive-inplace"], "eager")
    assert row["expected"]["expected"] == 5 and row["expected"]["ran"] == 5
    assert row["expected"]["extras"] == []


def test_sdpa_math_with_is_causal_names_the_mask_built_per_call(post_cpu):
    row = _row(post_cpu["sdpa-math"], "math")
    e = row["expected"]
    assert e["expected"] == 5 and e["ran"] > e["expected"]
    extras = _extras(row)
    mask = extras["mask_built_per_call"]
    assert {"aten::tril", "aten::where"} <= set(mask["names"]) and mask["us_per_call"] > 0
    assert "is_causal" in mask["fix"]
    assert "aten::isneginf" in extras["safe_softmax_guard"]["names"]
    assert "hidden_copy" not in extras
    # every op counted is explained: expected steps plus the named extras
    assert e["ran"] == e["expected"] + sum(x["per_call"] for x in e["extras"])


def test_cpu_fused_sdpa_runs_one_op(post_cpu):
    e = _row(post_cpu["sdpa"], "cpu_fused")["expected"]
    assert (e["expected"], e["ran"], e["extras"]) == (1, 1, [])


def test_cpu_trace_has_host_time_but_no_host_bound_verdict(post_cpu):
    h = _row(post_cpu["sdpa"], "cpu_fused")["host"]
    assert h["host_us_per_call"] > 0 and h["gpu_us_per_call"] is None and h["host_bound"] is None
    assert h["scope"] == "aten::scaled_dot_product_attention"
    assert h["cpu_only"] and "there is no GPU to be bound by" in h["summary"]  # not "unknown": there is no GPU (issue 47)


def test_text_report_reads_like_the_post(post_cpu, tmp_path):
    from tb_attn_plugin.report.text import render

    text = render(post_cpu["naive"])
    assert "expected 5 ops per forward, ran 6: +1 hidden copy" in text
    assert "hidden copy from an out-of-place op" in text


# -- the tables --------------------------------------------------------------------------------

def test_every_cause_row_explains_its_own_example():
    for row in X.CAUSES:
        *path, item = row.example.split(" > ")
        got = _cause(item, path, row.index_operands)
        assert got is not None and got.cause == row.cause, (row.cause, row.example, got)
        assert row.source and row.what and row.fix


def test_every_launch_api_row_matches_its_example():
    for row in host_cost.LAUNCH_APIS:
        assert host_cost.api_of(row.example) is row, row
        assert row.source


def test_every_expectation_row_has_an_example_and_a_source():
    for row in X.EXPECTATIONS + (X.DEFAULT_FUSED,):
        assert row.example and row.source
        assert row.steps or row.reason_unknown  # a count, or why none is claimed


def test_an_occupancy_query_and_a_driver_launch_are_told_apart():
    assert host_cost.api_of("cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags").kind == "occupancy_query"
    assert "0% achieved occupancy" in host_cost.api_of("cuLaunchKernelEx").note
    assert host_cost.api_of("cudaMemsetAsync") is None


# -- the shared GPU traces -----------------------------------------------------------------------

def test_bert_flash_on_h100_one_kernel_four_transposes_host_vs_gpu():
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    row = _row(r, "flash")
    e, h = row["expected"], row["host"]
    assert (e["unit"], e["expected"], e["ran"], e["extras"]) == ("kernels", 1, 1, [])
    assert e["transposes"] == 4 and e["transposes_expected"] == 4  # as the post saw for flash
    # README: 4 flash_fwd_kernel, 37.4 µs in all
    assert h["gpu_us_per_call"] == pytest.approx(37.4 / 4, abs=0.05 / 4)
    assert [a["name"] for a in h["launch_apis"]] == ["cudaLaunchKernel"]
    assert h["host_bound"] == (h["host_us_per_call"] > h["gpu_us_per_call"])
    assert h["scope"] == "aten::scaled_dot_product_attention" and h["attention_op_self_us_per_call"] > 0
    # the self times of the scope's ops add up to at most its wall time
    assert 0 < h["attention_op_self_us_per_call"] + h["dispatch_us_per_call"] <= h["host_us_per_call"] + 1e-6
    assert 0 < h["launch_us_per_call"] < h["host_us_per_call"]


def test_mi300x_launches_are_hip():
    r = analyze_file(str(shared_trace("tl_mi300x_bert_small_sdpa_aotriton")))
    h = _row(r, "aotriton")["host"]
    assert h["launch_apis"] and all(a["name"].startswith("hip") for a in h["launch_apis"])
    assert h["gpu_us_per_call"] == pytest.approx(113.7 / 4, abs=0.05 / 4)  # README: 4 attn_fwd, 113.7 µs (to 0.1)


def test_graph_replayed_calls_have_no_host_verdict():
    r = analyze_file(str(shared_trace("tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")))
    h = _row(r, "ck")["host"]
    assert h["graph_replay"] is True and h["host_bound"] is None and h["gpu_us_per_call"] > 0


def test_owlv2_eager_names_its_layout_copies():
    r = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    row = _row(r, "eager")
    x = _extras(row)["layout_copy"]
    assert x["per_call"] == 4  # q, k, v .contiguous() after the head transpose, and the output reshape
    assert "hidden_copy" not in _extras(row)
    assert "aten::addmm" in row["expected"]["outside"]["names"]  # projections: outside the count


# -- the post's table on a GPU ---------------------------------------------------------------------

POST_TABLE = {  # variant: (implementation, kernels per forward, extras that must be named)
    "naive": ("eager", 6, {"hidden_copy"}),
    "naive-inplace": ("eager", 5, set()),
    "sdpa-math": ("math", 20, {"mask_built_per_call", "safe_softmax_guard", "dtype_cast"}),
    "sdpa-efficient": ("efficient", 1, set()),
    "sdpa-flash": ("flash", 1, set()),
    "sdpa-cudnn": ("cudnn", 1, set()),
}


def test_the_posts_table_on_gpu_fixtures():
    runs = {t.run: t for t in find_traces(str(POST_GPU))} if POST_GPU.is_dir() else {}
    if not runs:
        pytest.skip(f"no GPU recording of the post's variants under {POST_GPU}: record them with "
                    "scripts/record_gpu_traces.sh on a GPU machine (python -m demo --post --device cuda "
                    "--dtype bfloat16) and commit the post-* runs there")
    for variant, (impl, kernels, causes) in POST_TABLE.items():
        (t,) = [t for name, t in runs.items() if name.startswith(f"post-{variant}-L")]
        row = _row(analyze_file(t.path), impl)
        e = row["expected"]
        assert e["unit"] == "kernels" and e["ran"] == kernels, (variant, e["summary"])
        assert causes <= set(_extras(row)), (variant, e["summary"])
        if variant == "naive-inplace":
            assert "hidden_copy" not in _extras(row)
        if variant == "sdpa-math":
            assert [f["flag"] for f in e["flags"]] == ["fp32_gemm"]  # sgemm on bf16 inputs
        if variant in ("sdpa-flash", "sdpa-efficient"):
            assert e["transposes"] == 4
        if variant == "sdpa-cudnn":
            assert e["transposes"] == 0
            assert "cuLaunchKernelEx" in {a["name"] for a in row["host"]["launch_apis"]}


def test_hf_llama_eager_rotary_is_outside_and_gqa_copies_are_named(tmp_path):
    """A Llama layer (transformers' eager attention, grouped KV heads): the rotary embedding's
    elementwise ops before QKᵀ are the layer's preparation, not repeated scale steps, and repeat_kv's
    expand + reshape of K and V are layout copies."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("torch and transformers are needed to record a Llama layer")
    subprocess.run([sys.executable, "-m", "demo", "--variants", "hf-eager", "--lengths", "32", "--steps", "1", "--logdir", str(tmp_path)],
                   cwd=REPO, check=True, timeout=300, capture_output=True)
    (t,) = find_traces(str(tmp_path))
    row = _row(analyze_file(t.path), "eager")
    e = row["expected"]
    assert {"qk_matmul", "scale", "mask", "softmax", "av_matmul"} <= set(e["expected_steps"])
    assert not [x for x in e["extras"] if x["cause"] == "repeated_step" and x["step"] in ("scale", "mask")], e["summary"]
    assert _extras(row)["layout_copy"]["per_call"] >= 2  # K and V repeated for the grouped heads
    assert "aten::mul" in e["outside"]["names"]  # rotary: q * cos, k * cos, ...


def test_fp32_gemm_names_against_tensor_core_names():
    assert all(X.FP32_GEMM.search(n) for n in X.FP32_GEMM_EXAMPLES)
    # tensor-core GEMMs of the shared H100 trace and the post's naive (s16816 / s1688, bf16)
    for n in ("cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1",
              "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
              "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"):
        assert not X.FP32_GEMM.search(n)


def test_no_count_is_claimed_where_the_table_has_none():
    from collections import Counter

    from tb_attn_plugin.reading.expected import expected_steps

    for impl in ("compiled", "mha_fastpath"):
        assert expected_steps(impl, Counter({"qk_matmul": 1}), {}) is None
        assert X.expectation(impl).reason_unknown
    # an unknown fused family is the table's one kernel, whatever helpers the call ran (they are extras)
    assert expected_steps("sage", Counter({"fused": 1, "quantize": 2}), {}) == ["fused"]
    # eager: the optional steps count only when the call has them
    assert expected_steps("eager", Counter({"qk_matmul": 1, "softmax": 1, "av_matmul": 1}), {}) == [
        "qk_matmul", "softmax", "av_matmul"]
    assert expected_steps("math", Counter(), {"causal": True}) == ["qk_matmul", "scale", "mask", "softmax", "av_matmul"]


@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"])
def test_calls_alike_are_judged_once_with_the_same_readings(name):
    """read_calls judges the items of each kind of call once (expected._Alike): each call's reading
    is the one it gets judged on its own."""
    from tb_attn_plugin.reading import expected

    keep: dict = {}
    analyze_file(str(shared_trace(name)), keep=keep)
    L, calls, call_of, m = keep["L"], keep["calls"], keep["call_of"], keep["measured"]
    shared = expected.read_calls(L, calls, call_of, m.stage_of, bool(L.kernels))
    items = expected._items_gpu(L, calls, call_of)
    where = (L.where_name(expected._is_attention_op), L.where_name(expected.X.TRANSPOSE_OP.__eq__))
    alone = [expected.read_call(L, c, items[c.id], m.stage_of, "kernels", True, where) for c in calls]
    assert len(calls) > 1 and repr(shared) == repr(alone)
