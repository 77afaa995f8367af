"""Compare says whether a difference is beyond the runs' step-to-step spread (report/noise.py), on
real CPU traces recorded here with torch.profiler; identical ops count identical modelled bytes."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.compare import compare_reports
from tb_attn_plugin.report.noise import ALPHA, mann_whitney, min_p
from tb_attn_plugin.report.text import render_compare
from tests.conftest import REPO, shared_trace

STEPS = 8


def record_together(tmp: Path, *runs: tuple[str, str, int]) -> list[Path]:
    """Record (name, mode, sequence length) runs at the same time, each in its own process: a load
    on this machine then falls on all of them alike, as it would not on two runs recorded one after another."""
    pytest.importorskip("torch")
    paths = [tmp / f"{name}.json" for name, _, _ in runs]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.cpu_models", mode, str(p), str(STEPS), str(seq)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for (_, mode, seq), p in zip(runs, paths)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return paths


def profiler_steps(path: Path) -> int:
    """How many ``ProfilerStep#N`` spans the raw trace holds (a walker of its own)."""
    ev = json.loads(path.read_text())["traceEvents"]
    return sum(1 for e in ev if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#"))


def test_mann_whitney_exact_matches_counting_every_ordering():
    # U's exact distribution against a brute force over every split of the pooled ranks
    from itertools import combinations
    x, y = [3.1, 0.5, 2.2, 7.0], [4.4, 5.5, 6.1, 0.9, 8.8]
    u, p, method = mann_whitney(x, y)
    assert method == "exact" and u == sum(a > b for a in x for b in y)
    pooled = x + y
    us = [sum(pooled[i] > pooled[j] for i in c for j in range(9) if j not in c) for c in combinations(range(9), 4)]
    lo = min(u, 20 - u)
    assert p == pytest.approx(min(1.0, 2 * sum(v <= lo for v in us) / len(us)))
    assert min_p(3, 3) == pytest.approx(0.1) and min_p(5, 5) < ALPHA <= min_p(4, 4)


@pytest.fixture(scope="module")
def eager_runs(tmp_path_factory) -> dict[str, Path]:
    """The same eager model twice at length 32 and once at 256 (8x the length: 64x the scores), recorded
    at once: one wave of processes serves both the within-noise and the beyond-noise test."""
    runs = (("first", "eager", 32), ("again", "eager", 32), ("L256", "eager", 256))
    return dict(zip([r[0] for r in runs], record_together(tmp_path_factory.mktemp("eager_runs"), *runs)))


def test_same_model_twice_is_within_noise_and_bytes_are_identical(eager_runs):
    a, b = eager_runs["first"], eager_runs["again"]
    ra, rb = analyze_file(str(a)), analyze_file(str(b))
    assert [s["calls"] for s in ra["steps"]] == [s["calls"] for s in rb["steps"]] == [2] * STEPS
    c = compare_reports([("first", ra), ("again", rb)])
    assert c["noise"]["verdict"] == "within_noise", c["noise"]
    assert len(c["noise"]["samples_us"][0]) == profiler_steps(a) == len(c["noise"]["samples_us"][1]) == profiler_steps(b)
    assert c["noise"]["p_value"] >= ALPHA
    assert c["summary"].startswith("again vs first: within noise:")
    text = render_compare(c)
    assert " saved " not in text and "within noise" in c["decomposition"]["sentence"]
    assert c["decomposition"]["bytes"][0] == c["decomposition"]["bytes"][1] > 0
    assert c["differences"] == []


def test_eight_times_the_length_is_beyond_noise(eager_runs):
    short, long = eager_runs["first"], eager_runs["L256"]  # 8x the length: 64x the scores
    c = compare_reports([("L32", analyze_file(str(short))), ("L256", analyze_file(str(long)))])
    assert c["noise"]["verdict"] == "beyond_noise", c["noise"]
    assert c["noise"]["p_value"] < ALPHA
    assert c["noise"]["median_us"][1] > 4 * c["noise"]["median_us"][0]
    assert "beyond noise" in c["summary"] and "within noise" not in render_compare(c)
    assert c["decomposition"]["sentence"].startswith("L256 spent ")


def test_one_step_runs_cannot_tell_and_other_devices_are_said_first(recorded_traces):
    gpu = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    cpu = analyze_file(str(recorded_traces / "eager.json.gz"))
    assert len(gpu["steps"]) == 1
    c = compare_reports([("h100", gpu), ("cpu", cpu)])
    assert c["noise"]["verdict"] == "cannot_tell" and c["noise"]["p_value"] is None
    assert c["differences"][0] == "different devices: h100 ran on NVIDIA H100 80GB HBM3, cpu on CPU"
    first_pct = c["summary"].index("%")
    assert c["summary"].index("different devices") < first_pct and c["summary"].index("different models") < first_pct
    assert c["summary"].index("cannot tell whether this is noise") < first_pct
    assert "saved" not in c["decomposition"]["sentence"] and "spent" not in c["decomposition"]["sentence"]


def test_cpu_runs_compare_their_ops(recorded_traces):
    eager = analyze_file(str(recorded_traces / "eager.json.gz"))
    sdpa = analyze_file(str(recorded_traces / "sdpa.json.gz"))
    c = compare_reports([("eager", eager), ("sdpa", sdpa)])
    assert c["time_basis"] == "cpu"
    # from the raw events: op names that ran in one trace and not the other
    def names(p):
        return {e["name"] for e in json.loads(gzip.decompress(p.read_bytes()))["traceEvents"] if e.get("cat") == "cpu_op"}
    only_sdpa = names(recorded_traces / "sdpa.json.gz") - names(recorded_traces / "eager.json.gz")
    got = {o["name"] for o in c["ops_only_in"]["sdpa"]}
    assert got and got <= only_sdpa | {n for n in got if n.startswith("autograd::")}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in got
    assert "aten::_softmax" in {o["name"] for o in c["ops_only_in"]["eager"]}
    assert "attention ops only in sdpa: " in render_compare(c)


def test_identical_ops_count_identical_bytes_under_a_roof(recorded_traces, tmp_path):
    """A measured roof whose plausibility threshold for softmax falls between the fastest and the
    slowest call's softmax: every call of one shape must count the same bytes (all or none)."""
    doc = json.loads(gzip.decompress((recorded_traces / "eager.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    soft = [e for e in ev if e.get("name") == "aten::softmax" and e.get("ph") == "X"]
    dims = soft[0]["args"]["Input Dims"][0]  # [B, H, Lq, Lk] of the scores
    e_elems = math.prod(dims)
    durs = sorted(float(e["dur"]) for e in soft)
    assert len(soft) >= 2
    if durs[0] == durs[-1]:
        pytest.skip("every softmax took the same time: no threshold between them")
    threshold_us = math.sqrt(durs[0] * durs[-1]) if durs[0] > 0 else durs[-1] / 2
    nbytes = 2.0 * 4 * e_elems  # read and write the fp32 score matrix once
    bw_tbs = 0.25 * nbytes / (threshold_us * 1e-6) / 1e12  # roofline/section.py PLAUSIBLE = 0.25
    doc["tb_attn"] = {"format": 1, "peaks": {"kind": "measured", "device_type": "cpu", "device": "test CPU",
                                             "tflops": {"fp32": 0.05}, "bandwidth_tbs": bw_tbs}}
    p = tmp_path / "roofed.json"
    p.write_text(json.dumps(doc))
    r = analyze_file(str(p))
    rows = r["roofline"]["layers"]
    per_call = {(st["stage"], st["pass"]): st["bytes"] for row in rows for st in row["stages"]}
    got = per_call.get(("softmax", "fwd"), 0.0)
    assert got in (0.0, len(soft) * nbytes), (got, len(soft) * nbytes)


def test_one_step_runs_with_calls_enough_let_the_calls_spread_stand_in():
    # the shared traces' README: 180 Owlv2Attention module calls, 4 BertSdpaSelfAttention calls (the calls are their BertAttention modules), one step each
    owl = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    bert = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    mi300 = analyze_file(str(shared_trace("tl_mi300x_bert_small_sdpa_aotriton")))
    assert len(owl["call_us"]) == 180 and len(bert["call_us"]) == 4 == len(mi300["call_us"])
    assert sum(owl["call_us"]) == pytest.approx(owl["attention_gpu_us"], abs=0.1)
    c = compare_reports([("owl", owl), ("bert", bert)])
    assert c["noise"]["unit"] == "call" and [len(s) for s in c["noise"]["samples_us"]] == [180, 4]
    assert c["noise"]["p_value"] is not None and "the calls' spread stands in" in c["summary"]
    # 4 calls against 4 cannot reach p < 0.01 (the fewest orderings: 2 of 70)
    c = compare_reports([("h100", bert), ("mi300x", mi300)])
    assert c["noise"]["verdict"] == "cannot_tell" and "too few calls to stand in" in c["summary"]
