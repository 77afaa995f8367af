"""Kernel fingerprints, occupancy as it really is, and why not flash (issue 25, items 2, 3 and 5)."""

from __future__ import annotations

import gzip
import json
import re
import warnings
from pathlib import Path

import msgspec
import pytest

from tb_attn_plugin.reading import fingerprint, occupancy, why_not_flash
from tb_attn_plugin.reading.eligibility_rules import CHECKS
from tb_attn_plugin.reading.fingerprint_rules import FIELDS, RULES
from tb_attn_plugin.reading.why_not_flash import PREDICATES
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace
from tests.test_report_schema import SCHEMA, jsonschema

GPU_TRACES = ("tl_h100_bert_small_sdpa_flash", "tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_bert_small_sdpa_aotriton",
              "tl_mi300x_torch_compile_small", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")


def _device_properties(name: str) -> dict:
    with gzip.open(shared_trace(name)) as f:
        return json.load(f)["deviceProperties"][0]


# -- fingerprints -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.field}:{r.pattern[:30]}")
def test_every_rule_decodes_its_own_example(rule):
    """A row whose example another row of its field claims first would never fire: each row is reachable."""
    m = re.search(rule.pattern, rule.example[:fingerprint.NAME_LIMIT])
    assert m is not None, f"{rule.example!r} does not match {rule.pattern!r}"
    want = re.sub(r"\{(\d+)\}", lambda g: m.group(int(g.group(1))) or "", rule.value)
    assert fingerprint.decode(rule.example)[rule.field] == want
    assert rule.source


def test_the_posts_kernel_names_decode_into_their_fields():
    # "Profiling in PyTorch (Part 3): Attention is all you profile" names these kernels and reads them by hand
    fp = fingerprint.decode("fmha_cutlassF_bf16_aligned_64x64_rf_sm80")
    assert (fp["pass"], fp["dtype"], fp["tile"], fp["arch"]) == ("fwd", "bf16", "64x64", "sm80")
    assert fp["library"].startswith("CUTLASS")
    fp = fingerprint.decode("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0")
    assert (fp["library"], fp["pass"], fp["dtype"], fp["knob"], fp["tile"], fp["arch"]) == (
        "cuDNN", "fwd", "fp16", "6", "128x64x64", "sm80")
    assert fp["math_unit"] == "tensor cores (wmma)"
    fp = fingerprint.decode("ampere_sgemm_128x128_mods_nt")
    assert fp["math_unit"] == "CUDA cores (sgemm)" and fp["dtype"] == "fp32"
    assert any("CUDA cores" in f for f in fingerprint.flags(fp, "sm80", "qk_matmul"))
    fp = fingerprint.decode("ampere_h16816gemm_256x128_ldg8_mods_stages_64x3_nt")
    assert fp["math_unit"] == "tensor cores (h16816)" and not fingerprint.flags(fp, "sm80")


def test_an_unknown_name_stays_unknown():
    fp = fingerprint.decode("my_custom_kernel")
    assert all(fp[f] is None for f in FIELDS)
    assert fingerprint.summary(fp) == "unknown"


def test_older_architecture_flag_compares_within_a_vendor_only():
    fp = fingerprint.decode("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>"
                            "(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1::Params)")
    assert any("built for sm75, ran on sm90" in f for f in fingerprint.flags(fp, "sm90"))
    assert not fingerprint.flags(fp, "sm75")
    assert not fingerprint.flags(fp, "gfx94x")


@pytest.mark.parametrize("name", GPU_TRACES)
def test_every_attention_and_gemm_kernel_of_a_shared_trace_has_a_fingerprint(name):
    r = analyze_file(str(shared_trace(name)))
    fps = r["kernel_reading"]["fingerprints"]
    seen = 0
    for lay in r["layers"]:
        for k in lay.kernels:
            fp = fps[k.name]
            if k.stage in ("fused", "qk_matmul", "av_matmul", "qkv_proj", "out_proj"):
                seen += 1
                assert fp["library"] is not None, k.name
            if "gemm" in k.name.lower() or k.name.startswith("Cijk_"):
                assert fp["math_unit"] is not None, k.name
    assert seen
    assert all(row["fingerprint"] and row["name"] in fps for row in r["kernels"])


# -- occupancy ----------------------------------------------------------------------------------------------

def test_the_posts_occupancy_figures_on_the_a100():
    """A100 (the HTA trace's deviceProperties): flash's 128 threads x 255 registers -> 2 blocks -> 8 of 64 warps;
    cuDNN's 256 threads x 240 registers -> 1 block -> 12.5%."""
    dev = occupancy.device_limits(_device_properties("hta_a100_negative_log_softmax_fwdbwd"))
    got = occupancy.theoretical(255, 0, 128, dev)
    assert (got["blocks_per_sm"], got["warps_per_sm"], got["max_warps_per_sm"], got["theoretical_pct"]) == (2, 8, 64, 12.5)
    assert got["limited_by"] == ["registers"]
    got = occupancy.theoretical(240, 0, 256, dev)
    assert (got["blocks_per_sm"], got["theoretical_pct"], got["limited_by"]) == (1, 12.5, ["registers"])


def test_shared_memory_and_warps_can_bind():
    dev = occupancy.device_limits(_device_properties("tl_h100_owlv2_eager_bmm_softmax"))
    # the H100 trace's cuBLAS kernel: 168 registers, 231,424 bytes of shared memory, 384 threads
    got = occupancy.theoretical(168, 231424, 384, dev)
    assert got["blocks_per_sm"] == 1 and got["theoretical_pct"] == 18.75
    assert set(got["limited_by"]) == {"registers", "shared memory"}
    got = occupancy.theoretical(16, 0, 1024, dev)
    assert got["limited_by"] == ["warps"] and got["theoretical_pct"] == 100.0


def test_amd_device_properties_give_no_cuda_occupancy():
    assert occupancy.device_limits(_device_properties("tl_mi300x_bert_small_sdpa_aotriton")) is None


def test_occupancy_of_the_h100_traces_sits_beside_cuptis_estimate():
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    rows = [o for lay in r["layers"] for o in lay.occupancy]
    assert rows and all(o.theoretical_pct is not None for o in rows)
    flash = [o for o in rows if "flash_fwd_kernel" in o.name]
    assert flash and all("low by design" in o.reading and o.achieved_pct is not None for o in flash)
    # the post's flash figure, on this trace's H100: 128 threads x 255 registers -> 2 blocks -> 8 of 64 warps
    assert {(o.block_threads, o.registers_per_thread, o.blocks_per_sm, o.warps_per_sm, o.theoretical_pct)
            for o in flash} == {(128, 255, 2, 8, 12.5)}


def test_a_zero_estimate_over_48_kib_is_kinetos_default_limit_not_the_launch_api():
    r = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    rows = [o for lay in r["layers"] for o in lay.occupancy if o.name.startswith("sm90_xmma_gemm")]
    assert rows
    for o in rows:
        assert o.achieved_pct is None and o.shared_memory_bytes > 49152
        assert o.zero_estimate_cause == "shared memory over the default limit" and o.theoretical_pct > 0
        assert "does not estimate" not in o.reading


def test_amd_traces_say_once_why_occupancy_is_unknown():
    r = analyze_file(str(shared_trace("tl_mi300x_bert_small_sdpa_aotriton")))
    assert all(lay.occupancy == [] for lay in r["layers"])
    note = r["kernel_reading"]["occupancy"]
    assert note.startswith("unknown") and "grid and block only" in note


# -- why not flash ------------------------------------------------------------------------------------------

def test_every_check_has_a_predicate_or_is_declared_unanswerable():
    from tb_attn_plugin.reading.eligibility_rules import UNANSWERABLE

    for row in CHECKS:
        assert (row.backend, row.check) in PREDICATES or ("*", row.check) in PREDICATES or row.check in UNANSWERABLE
        assert row.source.startswith("aten/src/ATen/native/transformers/")
    from tb_attn_plugin.reading.eligibility_rules import CPU_CHECKS
    from tb_attn_plugin.reading.why_not_flash import CPU_PREDICATES

    for row in CPU_CHECKS:
        assert row.check in CPU_PREDICATES or row.check in UNANSWERABLE, row.check


def _record(tmp: Path, name: str, fn) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.no_grad():
            fn(torch)
    out = tmp / f"{name}.json"
    prof.export_chrome_trace(str(out))
    return out


def _sdpa(q_shape, k_shape, dtype="float32", **kw):
    def run(torch):
        import torch.nn.functional as F

        dt = getattr(torch, dtype)
        q, k = torch.randn(*q_shape, dtype=dt), torch.randn(*k_shape, dtype=dt)
        v = torch.randn(*k_shape, dtype=dt)
        if kw.pop("dense_mask", False):
            kw["attn_mask"] = torch.randn(q_shape[0], q_shape[1], q_shape[2], k_shape[2], dtype=dt)
        F.scaled_dot_product_attention(q, k, v, **kw)
    return run


SM80 = {"vendor": "NVIDIA", "compute_capability": "8.0"}


def _sdpa_args(path: Path) -> dict:
    """The recorded args of the trace's aten::scaled_dot_product_attention, read from the raw events."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return next(e["args"] for e in events if e.get("name") == why_not_flash.SDPA_OP)


def _refusals(path: Path, device: dict = SM80) -> dict[str, list[str]]:
    """The CUDA rules replayed on a CPU recording's SDPA inputs, judged for an sm80 GPU (the report of a CPU
    trace judges it by the CPU's rules: test_cpu_why_not_flash.py)."""
    a = _sdpa_args(path)
    x, _ = why_not_flash.inputs_of(a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"), False, device,
                                a.get("Input Strides"))
    w = why_not_flash.judge(x)
    assert "sm80" in w["device"] and "assumed" not in w["device"]
    return {b["backend"]: [r["check"] for r in b["refusals"]] for b in w["backends"]}


def _backends(path: Path) -> dict[str, dict]:
    a = _sdpa_args(path)
    x, _ = why_not_flash.inputs_of(a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"), False, SM80,
                                a.get("Input Strides"))
    return {b["backend"]: b for b in why_not_flash.judge(x)["backends"]}


def test_float32_with_a_dense_mask_says_which_fused_backends_refuse(tmp_path):
    path = _record(tmp_path, "fp32_mask", _sdpa((2, 4, 16, 64), (2, 4, 16, 64), dense_mask=True))
    got = _refusals(path)
    assert got["flash"] == ["check_for_attn_mask", "check_dtypes_flash_attention"]
    assert got["efficient"] == []  # float32 and a mask are fine for the efficient kernel on sm80
    assert got["cudnn"] == ["check_dtypes_low_precision"]
    flash = _backends(path)["flash"]
    assert "is_causal" in flash["refusals"][0]["fix"] and "bfloat16" in flash["refusals"][1]["fix"]


def test_bf16_causal_square_inputs_pass_every_replayed_check(tmp_path):
    path = _record(tmp_path, "bf16_causal", _sdpa((1, 2, 32, 64), (1, 2, 32, 64), "bfloat16", is_causal=True))
    got = _refusals(path)
    assert got == {"flash": [], "efficient": [], "cudnn": []}
    assert all(b["eligible"] for b in _backends(path).values())


def test_causal_with_fewer_queries_than_keys_refuses_flash(tmp_path):
    path = _record(tmp_path, "causal_rect", _sdpa((1, 2, 8, 64), (1, 2, 16, 64), "bfloat16", is_causal=True))
    assert _refusals(path)["flash"] == ["check_flash_causal_non_square_seqlens"]


def test_grouped_query_attention_follows_enable_gqa(tmp_path):
    path = _record(tmp_path, "gqa", _sdpa((1, 4, 16, 64), (1, 2, 16, 64), "bfloat16", enable_gqa=True))
    assert _refusals(path)["flash"] == []


def test_head_dim_alignment_and_dropout_resolution(tmp_path):
    got = _refusals(_record(tmp_path, "odd", _sdpa((1, 2, 16, 66), (1, 2, 16, 66), dropout_p=0.1)))
    assert "check_head_dim_size_mem_efficient" in got["efficient"]
    assert {"check_cudnn_dropout", "check_cudnn_tensor_shapes"} <= set(got["cudnn"])


def test_pytorchs_own_debug_reasons_where_this_build_gives_them(tmp_path):
    """torch.backends.cuda.can_use_flash_attention(params, debug=True) explains a refusal only in a CUDA
    build: a CPU-only build returns False before any check, with no reason to compare against."""
    torch = pytest.importorskip("torch")
    from torch.backends.cuda import SDPAParams, can_use_flash_attention

    q = torch.randn(2, 4, 16, 64)
    params = SDPAParams(q, q, q, torch.randn(2, 4, 16, 16), 0.0, False, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = can_use_flash_attention(params, True)
    assert ok is False
    reasons = " ".join(str(w.message) for w in caught)
    if not reasons:
        pytest.skip(f"torch {torch.__version__} gives no reasons without CUDA (can_use_flash_attention returned "
                    "False silently); the replayed checks are tested against recorded traces instead")
    assert "attn_mask" in reasons or "dtype" in reasons or "CUDA" in reasons


def test_a_transposed_last_dimension_refuses_the_fused_backends(tmp_path):
    def run(torch):
        import torch.nn.functional as F

        q = torch.randn(1, 2, 64, 16, dtype=torch.bfloat16).transpose(-1, -2)  # (1, 2, 16, 64), stride(-1) 16
        k = torch.randn(1, 2, 16, 64, dtype=torch.bfloat16)
        F.scaled_dot_product_attention(q, k, k)
    got = _refusals(_record(tmp_path, "strided", run))
    assert got == {b: ["check_last_dim_stride_equals_1_dense"] for b in ("flash", "efficient", "cudnn")}


def test_the_h100_flash_call_replays_with_its_recorded_strides():
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    w = r["layers"][0].why_not_flash
    assert w.device == "sm90" and w.ran == "flash"
    flash = next(b for b in w.backends if b.backend == "flash")
    assert flash.eligible is True and [u.check for u in flash.unknown] == ["check_runtime_disabled_flash"]


def test_hostile_launch_values_give_unknown_not_a_number(tmp_path):
    """The H100 BERT trace with its kernels' launch fields broken in every way a file can break them."""
    with gzip.open(shared_trace("tl_h100_bert_small_sdpa_flash")) as f:
        doc = json.load(f)
    bad = [("abc", 0, [128, 1, 1]), (-5, 0, [128, 1, 1]), (300, 0, [128, 1, 1]), (32, 10**12, [128, 1, 1]),
           (32, 0, {"x": 1}), (32, 0, [0, 1, 1]), (32, 0, [4096, 1, 1]), (None, None, None), (32, 0, [1e300, 1, 1])]
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels):
        regs, smem, block = bad[i % len(bad)]
        e["args"].update({"registers per thread": regs, "shared memory": smem, "block": block,
                          "est. achieved occupancy %": "high" if i % 2 else -3})
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    r = analyze_file(str(path))
    jsonschema.validate(msgspec.to_builtins(r), SCHEMA)
    rows = [o for lay in r["layers"] for o in lay.occupancy]
    assert rows
    for o in rows:
        assert o.achieved_pct is None
        assert o.theoretical_pct is None or 0 < o.theoretical_pct <= 100
        assert o.reading


def test_rocm_calls_are_judged_by_rocms_limits():
    """FLUX's VAE attention (1 head, head dim 512) ran AOTriton's attn_fwd on the MI300X: CUDA's 256 limit
    must not refuse it; whether AOTriton takes 512 depends on its version, which the trace does not say."""
    r = analyze_file(str(shared_trace("tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")))
    vae = [lay for lay in r["layers"] if lay.why_not_flash and lay.shape and lay.shape.head_dim == 512]
    assert vae
    backends = {b.backend: b for b in vae[0].why_not_flash.backends}
    assert backends["flash"].refusals == [] and backends["flash"].eligible is None
    assert "check_head_dim_size_flash" in [u.check for u in backends["flash"].unknown]
    assert [x.check for x in backends["cudnn"].refusals][0] == "USE_ROCM"


def test_a_warpgroup_size_alone_does_not_claim_tensor_cores():
    # cuBLAS's FP32 GEMM on an H100, as a public write-up quotes it (public code search): FFMA, not wgmma
    fp = fingerprint.decode("sm90_xmma_gemm_f32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_on_"
                            "kernel__5x_cublas")
    assert fp["math_unit"] is None and fp["library"] == "cuBLAS" and fp["arch"] == "sm90"


def test_cli_fingerprint_decodes_names_and_lists_the_rules():
    import subprocess
    import sys

    name = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0"
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "fingerprint", name, "--device-arch", "sm90", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)["kernels"]
    assert (row["library"], row["knob"], row["arch"]) == ("cuDNN", "6", "sm80")
    assert any("built for sm80, ran on sm90" in f for f in row["flags"])
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "fingerprint"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and f"{len(RULES)} rules" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "fingerprint", "--json"], capture_output=True, text=True,
                          timeout=120)
    rules = json.loads(proc.stdout)["rules"]
    assert proc.returncode == 0 and len(rules) == len(RULES)
    assert rules[0] == {"field": RULES[0].field, "value": RULES[0].value, "pattern": RULES[0].pattern,
                        "example": RULES[0].example, "source": RULES[0].source}
