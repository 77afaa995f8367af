"""Roofline: the device table, the bytes/FLOP model against hand computation, bounds on the real GPU
traces, measured peaks, and a speed-up decomposition on real CPU runs whose parts sum to the difference."""

from __future__ import annotations

import copy
import gzip
import json
import math
import re

import pytest

from tb_attn_plugin.roofline import devices
from tb_attn_plugin.roofline.device_table import DEVICES, GFX_COMPUTE, PRECISIONS
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.compare import compare_reports
from tb_attn_plugin.report.text import render, render_compare
from tb_attn_plugin.roofline import model, roof, section
from tb_attn_plugin.roofline.decompose import PARTS
from tests.conftest import shared_trace

GIB = 1 << 30
WANTED = ["A100 40GB", "A100 80GB", "H100 SXM", "H100 PCIe", "H200", "B200", "GB200", "L4", "L40S", "MI210",
          "MI250X", "MI300X", "MI325X", "MI355X", "A10G", "V100", "T4"]


# --- device table -------------------------------------------------------------------------------

def test_every_wanted_device_has_a_row():
    names = [row.name for row in DEVICES]
    for want in WANTED:
        assert any(re.search(rf"\b{re.escape(want)}\b", n) for n in names), want


@pytest.mark.parametrize("row", DEVICES, ids=lambda r: r.name)
def test_row_is_complete_and_identifies_from_name_and_from_facts(row):
    assert set(row.tflops) == set(PRECISIONS)
    assert row.tflops["fp32"] and (row.tflops["bf16"] or row.tflops["fp16"])  # a 16-bit matrix path at least
    assert all(v is None or v > 0 for v in row.tflops.values())
    if row.tflops["fp8"] and row.tflops["bf16"]:
        assert row.tflops["fp8"] == pytest.approx(2 * row.tflops["bf16"], rel=0.03)  # FP8 is 2x BF16 on these
    assert 0.1 < row.bandwidth_tbs < 20 and row.units > 0 and row.memory_gb > 0 and row.source
    assert row.vendor in ("NVIDIA", "AMD")
    assert re.fullmatch(r"\d+\.\d", row.arch) if row.vendor == "NVIDIA" else row.arch.startswith("gfx")
    # From its name (a real device name) ...
    assert devices.by_name(row.example, int(row.memory_gb * GIB)) is row
    d = devices.describe([{"name": row.example, "numSms": row.units, "totalGlobalMem": int(row.memory_gb * GIB)}])
    assert d["model"] == row.name and d["identified_by"] == "name" and d["peaks"]["bandwidth_tbs"] == row.bandwidth_tbs
    # ... and from name-less deviceProperties: compute capability / gfx target, SM/CU count, memory.
    cc = row.arch if row.vendor == "NVIDIA" else GFX_COMPUTE.get(row.arch, "9.0")
    major, minor = (int(x) for x in cc.split("."))
    props = {"name": "", "computeMajor": major, "computeMinor": minor, "numSms": row.units,
             "totalGlobalMem": int(row.memory_gb * GIB * 0.99), "warpSize": 64 if row.vendor == "AMD" else 32}
    got = devices.describe([props], has_gpu_kernels=True)
    assert got["identified_by"] == "facts" and "GPU" not in got["name"][:3]
    twin = next(r for r in DEVICES if r.name == got["model"])
    # A row that its facts cannot tell from another (H200 NVL vs SXM) gets that twin, with its own numbers.
    assert twin is row or (twin.units, twin.arch, round(twin.memory_gb)) == (row.units, row.arch, round(row.memory_gb))
    if row.by_facts and twin is not row:  # MI210 and one MI250 GCD: the same facts and the same numbers
        assert (twin.tflops, twin.bandwidth_tbs) == (row.tflops, row.bandwidth_tbs)


def test_peak_tflops_by_name_keeps_working():
    assert devices.peak_tflops("NVIDIA H100 80GB HBM3") == 989.5
    assert devices.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert devices.peak_tflops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5
    assert devices.peak_tflops("AMD Instinct MI300X VF") == 1307.4
    assert devices.peak_tflops("NVIDIA A1000") is None and devices.peak_tflops("") is None


def test_precision_fallback_and_unknown_gpus():
    v100 = devices.by_name("Tesla V100-SXM2-16GB")
    assert devices.peak_for(v100.tflops, "bf16") == (125.0, "fp16")  # no BF16 matrix path on Volta
    assert devices.peak_for(devices.by_name("AMD Instinct MI210").tflops, "tf32") == (45.3, "fp32")
    unknown = devices.describe([{"name": "", "numSms": 7, "computeMajor": 12, "computeMinor": 0}], True)
    assert unknown["name"].startswith("unknown NVIDIA GPU") and unknown["peaks"] is None
    assert devices.describe([], has_gpu_kernels=True)["name"] == "unknown GPU"
    assert devices.describe([], has_gpu_kernels=False) is None


# --- the model, by hand ---------------------------------------------------------------------------

SHAPE = {"batch": 2, "q_heads": 4, "kv_heads": 2, "q_len": 32, "k_len": 48, "head_dim": 16, "batch_heads": 8}


def test_bytes_and_flops_by_hand():
    z = model.sizes(SHAPE, "bfloat16")
    q, kv, e = 8 * 32 * 16, 2 * 2 * 48 * 16, 8 * 32 * 48  # GQA: K and V have 2 heads
    assert (z.q, z.kv, z.o, z.e, z.itemsize) == (q, kv, q, e, 2)
    assert model.stage_cost(z, "qk_matmul", "fwd") == (2 * e * 16, 2 * (q + kv + e))
    assert model.stage_cost(z, "softmax", "fwd") == (5 * e, 2 * 2 * e)
    assert model.stage_cost(z, "scale_mask", "fwd", passes=2) == (2 * e, 2 * 2 * 2 * e)
    assert model.stage_cost(z, "av_matmul", "fwd") == (2 * e * 16, 2 * (e + kv + q))
    assert model.stage_cost(z, "softmax", "bwd") == (4 * e, 3 * 2 * e)
    assert model.stage_cost(z, "qk_matmul", "bwd") == (4 * e * 16, 2 * (2 * e + 2 * q + 2 * kv))
    fused = model.stage_cost(z, "fused", "fwd", causal=True)
    assert fused == (4 * e * 16 / 2, 2 * (q + 2 * kv + q) + 4 * 8 * 32)  # + the fp32 log-sum-exp
    bwd = model.stage_cost(z, "fused", "bwd", causal=True)
    assert bwd == (2.5 * fused[0], 2 * 2 * (q + 2 * kv + q) + 4 * 8 * 32)
    assert model.stage_cost(z, "out_proj", "fwd") is None
    assert model.sizes({"q_len": 4}, "float32") is None


def test_fused_intensity_grows_with_length_and_eager_stays_near_d_over_2():
    # The facts file: fused ≈ Lk/2 FLOP/B at 2-byte types, unfused ≈ D/2 (score-matrix passes dominate).
    L, D = 8192, 128
    z = model.sizes({"batch": 1, "q_heads": 32, "kv_heads": 32, "q_len": L, "k_len": L, "head_dim": D,
                     "batch_heads": 32}, "bfloat16")
    f, b = model.stage_cost(z, "fused", "fwd")
    assert f / b == pytest.approx(L / 2, rel=0.01)
    f = sum(model.stage_cost(z, s, "fwd")[0] for s in ("qk_matmul", "scale_mask", "softmax", "av_matmul"))
    b = sum(model.stage_cost(z, s, "fwd")[1] for s in ("qk_matmul", "scale_mask", "softmax", "av_matmul"))
    assert D / 4 < f / b < D / 2 + 1


def test_point_attainable_fraction_and_bound_by_hand():
    r = {"tflops": {"bf16": 1000.0}, "bandwidth_tbs": 4.0}  # ridge 250 FLOP/B
    p = roof.point(flops=1e12, nbytes=1e10, time_us=2e4, units=10, roof=r, precision="bf16")  # I = 100
    assert p["intensity"] == 100 and p["attainable_tflops"] == 400  # min(1000, 100 × 4)
    assert p["achieved_tflops"] == 50 and p["achieved_tbs"] == 0.5 and p["fraction"] == 0.125
    assert p["bandwidth_fraction"] == 0.125 and p["bound"] == "memory" and p["mean_unit_us"] == 2000
    p = roof.point(flops=1e13, nbytes=1e10, time_us=2e4, units=10, roof=r, precision="bf16")  # I = 1000
    assert p["attainable_tflops"] == 1000 and p["bound"] == "compute"
    p = roof.point(flops=1e9, nbytes=1e6, time_us=50, units=10, roof=r, precision="bf16")
    assert p["bound"] == "launch" and p["bound_reason"].startswith("kernels average 5.0 µs")
    p = roof.point(flops=1e9, nbytes=1e6, time_us=50, units=10, roof=r, precision="bf16", unit="ops")  # CPU time
    assert p["bound"] == "launch" and p["bound_reason"].startswith("ops average 5.0 µs")
    assert "dispatch overhead" in p["bound_reason"] and "device" not in p["bound_reason"]
    p = roof.point(flops=1e9, nbytes=1e6, time_us=40, units=1, roof=r, precision="bf16")  # 40 µs, 2.5%
    assert p["bound"] == "launch" and "2.5%" in p["bound_reason"]
    p = roof.point(flops=1e9, nbytes=1e6, time_us=400, units=1, roof=None, precision="bf16")
    assert p["bound"] is None and p["attainable_tflops"] is None and "no roof" in p["bound_reason"]


def test_hostile_measured_peaks_in_metadata_are_ignored():
    for bad in ({"kind": "measured", "tflops": "x"}, {"kind": "measured", "tflops": {"fp32": -1}, "bandwidth_tbs": "1"},
                {"kind": "datasheet", "tflops": {"fp32": 1.0}, "bandwidth_tbs": 1.0}, [1, 2], "peaks"):
        assert roof.choose(None, {"peaks": bad}, has_gpu=False) is None
    nan = {"kind": "measured", "device_type": "cpu", "tflops": {"fp32": float("nan"), "bf16": 2.0},
           "bandwidth_tbs": float("inf")}
    got = roof.choose(None, {"peaks": nan}, has_gpu=False)
    assert got["tflops"]["fp32"] is None and got["bandwidth_tbs"] is None and got["tflops"]["bf16"] == 2.0
    assert roof.choose(None, {"peaks": {**nan, "device_type": "cpu"}}, has_gpu=True) is None  # CPU numbers, GPU trace


# --- real GPU traces --------------------------------------------------------------------------------

def test_owlv2_eager_is_memory_bound_against_the_h100_bandwidth():
    r = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    rf = r["roofline"]
    assert rf["roof"]["kind"] == "datasheet" and rf["roof"]["bandwidth_tbs"] == 3.35
    row = rf["layers"][0]
    # The vision encoder's 120 calls (5185 tokens) and the text encoder's 60 (5 tokens) share the layer
    # type but not the regime: two points, each labelled with its lengths.
    assert (row["layer_type"], row["implementation"], row["calls"]) == ("Owlv2Attention", "eager", 120)
    assert row["lengths"] == {"q_len": [5185, 5185], "k_len": [5185, 5185]} and row["lengths_text"] == "L 5185×5185"
    text_row = rf["layers"][1]
    assert (text_row["layer_type"], text_row["calls"], text_row["lengths_text"]) == ("Owlv2Attention", 60, "L 5×5")
    assert text_row["bound"] == "launch" and all(s["bound"] == "launch" for s in text_row["stages"])
    assert row["calls"] + text_row["calls"] == r["calls"]
    assert row["bound"] == "memory" and row["intensity"] < 989.5 / 3.35
    by = {(s["stage"], s["pass"]): s for s in row["stages"]}
    soft = by[("softmax", "fwd")]
    text_soft = next(s for s in text_row["stages"] if (s["stage"], s["pass"]) == ("softmax", "fwd"))
    assert soft["bound"] == "memory" and soft["time_us"] + text_soft["time_us"] == pytest.approx(262538.2, abs=0.1)
    assert soft["achieved_tbs"] == pytest.approx(soft["bytes"] / (soft["time_us"] * 1e-6) / 1e12, rel=1e-3)
    assert 0.1 < soft["bandwidth_fraction"] < 1.0
    # The stage's bytes: one read and one write of every call's score matrix (bf16).
    assert soft["bytes"] == 120 * 2 * 2 * 16 * 5185 * 5185
    assert re.fullmatch(r"Owlv2Attention \(eager, L 5185×5185\): memory-bound, [\d.]+ [TG]B/s of 3\.35 TB/s \(\d+%\); "
                        r"most time in softmax fwd", row["line"])
    assert any(v["id"] == "roofline" and "3.35 TB/s" in v["message"] for v in r["verdicts"])
    assert "memory-bound" in render(r) and "datasheet" in render(r)
    assert render(r).count(row["line"]) == 1  # the verdict, not repeated under the roofline heading
    t = rf["timing"]["gpu"]
    assert t["busy_us"] == pytest.approx(r["attention_gpu_us"], abs=0.01)
    assert sum(t["parts_us"].values()) == pytest.approx(t["wall_us"], abs=0.01)


@pytest.mark.parametrize("name", ["tl_h100_bert_small_sdpa_flash", "tl_mi300x_bert_small_sdpa_aotriton"])
def test_small_flash_calls_are_launch_bound_and_say_why(name):
    r = analyze_file(str(shared_trace(name)))
    row = r["roofline"]["layers"][0]
    assert row["implementation"] in ("flash", "aotriton") and row["bound"] == "launch"
    assert "too short to fill the device" in row["bound_reason"] and "launch-bound" in row["line"]
    assert row["fraction"] < roof.LOW_FRACTION
    # Fused: Q, K, V read and O written (plus the log-sum-exp): far less than a score matrix.
    fused = row["stages"][0]
    z = model.sizes(row["shape"], row["dtype"])
    assert fused["bytes"] == pytest.approx(row["calls"] * (z.itemsize * (z.q + 2 * z.kv + z.o) + 4 * z.rows))


def test_a_gpu_trace_without_device_names_is_identified_and_never_cpu_only(tmp_path):
    doc = json.loads(gzip.decompress(shared_trace("tl_h100_bert_small_sdpa_flash").read_bytes()))
    for p in doc["deviceProperties"]:
        p["name"] = ""
    nameless = tmp_path / "nameless.json"
    nameless.write_text(json.dumps(doc))
    r = analyze_file(str(nameless))
    assert r["device"]["model"] == "NVIDIA H100 SXM" and r["device"]["identified_by"] == "facts"
    assert r["roofline"]["roof"]["bandwidth_tbs"] == 3.35
    del doc["deviceProperties"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    r = analyze_file(str(bare))
    assert r["device"]["name"] == "unknown GPU" and r["time_basis"] == "gpu"
    text = render(r)
    assert "CPU only" not in text and "device: unknown GPU" in text
    assert r["roofline"]["roof"] is None and "no peak or bandwidth known" in text
    # Kernels not kept at all (a trace cut to its CPU side): the runtime launches still say a GPU ran.
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    launches_only = tmp_path / "launches_only.json"
    launches_only.write_text(json.dumps(doc))
    r = analyze_file(str(launches_only))
    assert r["time_basis"] == "cpu" and r["device"]["name"] == "unknown GPU"
    assert "CPU only" not in render(r)


def test_eager_vs_flash_on_the_h100_decomposes_into_parts_that_sum():
    a = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    b = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    d = compare_reports([("eager", a), ("flash", b)])["decomposition"]
    assert d["basis"] == "gpu" and sum(d["parts_us"].values()) == pytest.approx(d["measured_us"], abs=1e-6)
    assert d["parts_us"]["memory"] < -100_000  # the memory-bound eager stages are gone
    # one step each, so the calls' spread stands in (report/noise.py): 180 calls of 4.2 ms or 50 µs against
    # 4 of 27 µs is beyond noise, so the difference may be called a saving; that the models differ is said first
    c = compare_reports([("eager", a), ("flash", b)])
    assert c["noise"]["unit"] == "call" and c["noise"]["verdict"] == "beyond_noise" and c["noise"]["p_value"] < 0.01
    assert c["differences"] and c["differences"][0].startswith("different models")
    assert d["sentence"].startswith("flash saved") and "score matrix" in d["sentence"]


# --- real CPU runs -----------------------------------------------------------------------------------

def _check(d, a, b):
    assert set(d["parts_us"]) == set(PARTS)
    assert round(sum(d["parts_us"].values()), 3) == pytest.approx(d["measured_us"], abs=1e-9)
    wall = [r["roofline"]["timing"][d["basis"]]["wall_us"] for r in (a, b)]
    assert d["measured_us"] == pytest.approx(wall[1] - wall[0], abs=1e-3)
    for r in (a, b):
        t = r["roofline"]["timing"][d["basis"]]
        assert sum(t["parts_us"].values()) == pytest.approx(t["wall_us"], abs=0.01)
        assert t["busy_us"] == pytest.approx(r[f"attention_{d['basis']}_us"], abs=0.01)
    assert d["sentence"] and all(math.isfinite(v) for v in d["parts_us"].values())


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    """The demo profiled through the collector: eager, SDPA and the tiny HF Llama, on this CPU."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import os

    from demo.__main__ import main
    from tb_attn_plugin.collector import peaks

    peaks._memo.clear()  # measured afresh into this test's cache, whatever ran before in this process
    root = tmp_path_factory.mktemp("demo_runs")
    cache = tmp_path_factory.mktemp("peak_cache")
    old = os.environ.get("TB_ATTN_CACHE_DIR")
    os.environ["TB_ATTN_CACHE_DIR"] = str(cache)
    try:
        assert main(["--logdir", str(root / "logdir"), "--variants", "eager", "sdpa", "sdpa-math", "compiled", "hf-eager",
                     "hf-sdpa",
                     "--lengths", "128", "--steps", "1"]) == 0
    finally:
        if old is None:
            os.environ.pop("TB_ATTN_CACHE_DIR")
        else:
            os.environ["TB_ATTN_CACHE_DIR"] = old
    return root / "logdir", cache


_REPORTS: dict[str, dict] = {}


def _report(run_dir):
    """The run's report, analysed once per module (the demo's tests read the same runs several times);
    each caller gets its own copy."""
    (path,) = sorted(run_dir.glob("*.pt.trace.json.gz"))
    if str(path) not in _REPORTS:
        _REPORTS[str(path)] = analyze_file(str(path))
    return copy.deepcopy(_REPORTS[str(path)])


def test_demo_eager_vs_sdpa_on_the_cpu_measured_roof_and_decomposition(demo_runs):
    logdir, cache = demo_runs
    a, b = _report(logdir / "eager-L128"), _report(logdir / "sdpa-L128")
    for r in (a, b):
        rf = r["roofline"]
        assert rf["roof"]["kind"] == "measured" and rf["roof"]["bandwidth_tbs"] > 0 and rf["roof"]["tflops"]["fp32"] > 0
        assert r["metadata"]["peaks"]["host"] and "torch.utils.benchmark" in r["metadata"]["peaks"]["method"]
        assert rf["layers"] and rf["layers"][0]["bound"] in ("memory", "compute", "launch")
    head = [ln for ln in render(a).splitlines() if ln.startswith("  roofline (")]
    assert len(head) == 1 and head[0].startswith("  roofline (measured on ") and "measured: measured" not in head[0]
    assert a["roofline"]["layers"][0]["score_bytes"] == 1 * 4 * 128 * 128 * 4  # B·H·L·L fp32, never in sdpa
    assert b["roofline"]["layers"][0]["score_bytes"] is None
    # The measurement is cached per machine outside the logdir, and nothing was written into it; a roof
    # that a run's rates went above (measured on a loaded machine) is dropped, so the next profile measures again.
    flagged = [run.name for run in sorted(logdir.iterdir()) if _report(run)["roofline"].get("above_roof")]
    assert list((cache / "peaks").glob("*.json")) or flagged
    assert not [p for p in logdir.rglob("*") if "peak" in p.name]
    c = compare_reports([("eager", a), ("sdpa", b)])
    d = c["decomposition"]
    assert d["basis"] == "cpu"
    _check(d, a, b)
    assert "score matrix" in d["sentence"] and d["parts_us"]["memory"] < 0
    text = render_compare(c)
    assert "measured difference" in text and d["sentence"] in text


def test_tiny_hf_llama_eager_vs_sdpa_decomposes(demo_runs):
    logdir, _ = demo_runs
    a, b = _report(logdir / "hf-eager-L128"), _report(logdir / "hf-sdpa-L128")
    d = compare_reports([("hf-eager", a), ("hf-sdpa", b)])["decomposition"]
    _check(d, a, b)
    assert d["units"][0] > d["units"][1]  # eager runs more ops per call


def test_sdpa_backend_against_backend_decomposes(demo_runs):
    logdir, _ = demo_runs
    a, b = _report(logdir / "sdpa-math-L128"), _report(logdir / "sdpa-L128")
    assert {lay["implementation"] for lay in a["roofline"]["layers"]} == {"math"}
    d = compare_reports([("math", a), ("flash_cpu", b)])["decomposition"]
    _check(d, a, b)
    assert d["score_bytes"][0] > 0 and d["score_bytes"][1] == 0  # math materialises the scores, the fused kernel not


def test_lengths_a_factor_of_two_apart_are_separate_points():
    assert section._length_class({"q_len": 1024, "k_len": 2047, "head_dim": 64}) == (11, 11, 64)
    assert section._length_class({"q_len": 1, "k_len": 2048, "head_dim": 64}) == (1, 12, 64)
    assert section._lengths_text({"q_len": [1, 1], "k_len": [1024, 2047]}) == "Lq 1, Lk 1024–2047"
    assert section._lengths_text({"q_len": [77, 77], "k_len": [77, 77]}) == "L 77×77"


def test_compile_vs_eager_decomposes(demo_runs):
    logdir, _ = demo_runs
    a, b = _report(logdir / "eager-L128"), _report(logdir / "compiled-L128")
    assert b["layers"] and all(lay.compiled for lay in b["layers"])
    assert b["roofline"]["roof"]["kind"] == "measured" and b["roofline"]["layers"]
    d = compare_reports([("eager", a), ("compiled", b)])["decomposition"]
    _check(d, a, b)
    assert d["score_bytes"][0] > 0 and d["score_bytes"][1] == 0  # the compiled model runs SDPA: no score matrix


def test_hostile_device_properties_never_crash():
    for props in ([{"name": 7, "numSms": "132", "computeMajor": True, "totalGlobalMem": -1}], [None], ["x"],
                  [{"name": "x" * 100_000, "warpSize": 64, "numSms": 304, "computeMajor": 9, "computeMinor": 4}]):
        d = devices.describe(props, has_gpu_kernels=True)
        assert isinstance(d["name"], str) and len(d["name"]) < 400 and d["compute_capability"] in (None, "9.4")


def test_plain_profiler_cpu_traces_without_a_roof_still_decompose(cpu_traces):
    a, b = analyze_file(str(cpu_traces["eager"])), analyze_file(str(cpu_traces["sdpa"]))
    assert a["roofline"]["roof"] is None  # no collector, no measurement: said, not invented
    d = compare_reports([("eager", a), ("sdpa", b)])["decomposition"]
    _check(d, a, b)
    assert d["parts_us"]["memory"] == 0.0


def test_reports_without_roofline_give_no_decomposition():
    assert compare_reports([("a", {}), ("b", {"roofline": {"timing": {"gpu": None}}})])["decomposition"] is None


def test_measured_peaks_are_cached_per_machine(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from tb_attn_plugin.collector import peaks

    monkeypatch.setenv("TB_ATTN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peaks, "_memo", {})
    monkeypatch.setattr(peaks, "MIN_RUN_S", 0.01)
    first = peaks.measured_peaks("cpu")
    assert first["kind"] == "measured" and first["tflops"]["fp32"] > 0 and first["bandwidth_tbs"] > 0
    (cached,) = (tmp_path / "peaks").glob("*.json")
    assert json.loads(cached.read_text()) == first
    monkeypatch.setattr(peaks, "_memo", {})
    monkeypatch.setattr(peaks, "measure", lambda device: pytest.fail("measured again despite the cache"))
    assert peaks.measured_peaks("cpu") == first
    assert peaks.needs_measurement("cpu")


def test_the_same_model_on_two_gpus_decomposes_against_each_roof():
    """BERT-small, SDPA: flash on an H100, AOTriton on an MI300X: each run is split against its own roof."""
    h100 = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    mi300 = analyze_file(str(shared_trace("tl_mi300x_bert_small_sdpa_aotriton")))
    assert (h100["roofline"]["roof"]["bandwidth_tbs"], mi300["roofline"]["roof"]["bandwidth_tbs"]) == (3.35, 5.3)
    d = compare_reports([("h100", h100), ("mi300x", mi300)])["decomposition"]
    assert d["bandwidth_tbs"] == [3.35, 5.3] and d["bytes"][0] == d["bytes"][1]  # the same shapes, the same bytes
    _check(d, h100, mi300)
    # Each run's wall is its own (gaps included): since the call spans BertAttention with its output module
    # (vitwiden), the H100's call waits longer on the host between kernels than the MI300X's, so the MI300X's wall is
    # the shorter one; the sentence says so in the direction of the difference, whichever it is.
    assert d["measured_us"] == pytest.approx(d["wall_us"][1] - d["wall_us"][0], abs=1e-3)
    more_or_less = "more" if d["measured_us"] > 0 else "less"
    assert d["sentence"].startswith(f"cannot tell whether this is noise: mi300x took {abs(d['measured_us']):.3g} µs {more_or_less}")
    assert d["units"][0] == d["units"][1] and "from the launch gaps between kernels" in d["sentence"]
