"""The Reading panel (issue 25 item 7) in a real browser: a real ``tensorboard --logdir`` over the post's
variants that ``python -m demo --post`` records on the CPU (and the shared H100 BERT flash trace when
present), driven by frontend/browser/reading.mjs. TB_ATTN_UPDATE_SCREENSHOTS=1 writes
docs/screenshots/reading.png (and reading_gpu.png with the shared traces)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.browser import ROOT, require_browser, run_script, serving, shots_dir
from tests.conftest import SHARED_TRACES
from tests.test_browser import SPAN
from tests.test_plugin_tensorboard import poll

GPU = "tl_h100_bert_small_sdpa_flash"


def test_reading_panel_of_the_posts_variants(tmp_path):
    require_browser()
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: the post's variants cannot be recorded")
    logdir = tmp_path / "logdir"
    subprocess.run([sys.executable, "-m", "demo", "--post", "--lengths", "32", "--logdir", str(logdir)], cwd=ROOT,
                   check=True, timeout=300, capture_output=True)
    runs = sorted(p.name for p in logdir.iterdir())
    math = next(r for r in runs if r.startswith("post-sdpa-math-"))
    naive = next(r for r in runs if r.startswith("post-naive-") and "inplace" not in r)
    env = {"MATH_RUN": math, "NAIVE_RUN": naive}
    gpu = SHARED_TRACES / f"{GPU}.json.gz"
    if gpu.exists():
        (logdir / "gpu_bert_flash").mkdir()
        dst = logdir / "gpu_bert_flash" / f"host_1.{SPAN}.pt.trace.json.gz"
        dst.write_bytes(gpu.read_bytes())
        os.utime(dst, (1_600_000_000, 1_600_000_000))
        env["GPU_RUN"] = "gpu_bert_flash"
    for p in logdir.rglob("*"):
        os.utime(p, (1_600_000_000, 1_600_000_000))  # settled: analysed at once
    with serving(logdir, tmp_path) as (base, _):
        out = run_script("reading.mjs", base, shots_dir(tmp_path), **env)
    assert "the panel lists the call's" in out or "GPU_RUN" not in env


OWLV2 = "tl_h100_owlv2_eager_bmm_softmax"


def _raw_call_kernels(trace: dict, start_us: float, layer: str) -> dict[int, dict]:
    """The kernels a call launched, from the raw events alone: the call's module event (its ts is the
    sample's start), the runtime launches on its thread inside it, and the kernels of their correlation ids."""
    events = trace["traceEvents"]
    root = next(e for e in events if e.get("ph") == "X" and abs(e.get("ts", 0) - start_us) < 0.002
                and e.get("name", "").endswith(layer))
    lo, hi = root["ts"], root["ts"] + root["dur"]
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("tid") == root["tid"]
                and e.get("pid") == root["pid"] and lo <= e.get("ts", -1) <= hi and "correlation" in e.get("args", {})}
    return {e["args"]["correlation"]: e for e in events
            if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in launched}


def test_a_claim_highlights_its_kernels_in_one_call(tmp_path):
    """OWLv2 eager on an H100: the layout copies of call #0 and the GEMM launches of call #36 whose est.
    achieved occupancy reads 0, clicked in One call, highlight exactly the kernels the report's evidence
    names among the call's own kernels, which the raw events confirm: copies, and launches that read 0."""
    require_browser()
    src = SHARED_TRACES / f"{OWLV2}.json.gz"
    if not src.exists():
        pytest.skip(f"{src} is not present")
    logdir = tmp_path / "logdir"
    (logdir / "owlv2").mkdir(parents=True)
    dst = logdir / "owlv2" / f"host_1.{SPAN}.pt.trace.json.gz"
    dst.write_bytes(src.read_bytes())
    for p in logdir.rglob("*"):
        os.utime(p, (1_600_000_000, 1_600_000_000))
    with gzip.open(src, "rt") as f:
        trace = json.load(f)
    with serving(logdir, tmp_path) as (base, proc):
        report = poll(f"{base}/data/plugin/tb_attn/report?run=owlv2", lambda d: "reading" in d, timeout=300, proc=proc)
        samples = {s["id"]: s for s in report["call_samples"]}
        checks = []
        # an extra: the layout copies (the first call's copies are the evidence's first ids)
        c0 = samples[0]
        group = next(g for g in report["reading"] if g["layer_type"] == "Owlv2Attention")
        copy = next(x for x in group["expected"]["extras"] if x["cause"] == "layout_copy")
        raw = _raw_call_kernels(trace, c0["start_us"], c0["layer"])
        want = sorted(set(copy["evidence"]["kernel_correlations"]) & raw.keys())
        assert len(want) == copy["per_call"] == 4  # +4 layout copy: all four of this call are listed
        assert all("direct_copy_kernel" in raw[i]["name"] for i in want)  # the raw events say copies
        checks.append({"call": 0, "kind": "extra", "cause": "layout_copy", "expected": want,
                       "names": sorted({raw[i]["name"] for i in want}), "shot": "claim_layout_copy"})
        # an occupancy figure: the GEMM launches of call #36 whose estimate reads 0
        c36 = samples[36]
        layer = next(lay for lay in report["layers"] if lay["layer"] == c36["layer"])
        occ = next(o for o in layer["occupancy"] if o["zero_estimates"] and o["name"].startswith("sm90_xmma_gemm"))
        raw = _raw_call_kernels(trace, c36["start_us"], c36["layer"])
        zero = sorted(i for i, e in raw.items() if e["name"] == occ["name"]
                      and e["args"].get("est. achieved occupancy %") == 0)
        want = sorted(set(occ["evidence_correlations"]) & raw.keys())
        assert want and want == zero  # the evidence in this call is exactly its launches that read 0
        checks.append({"call": 36, "kind": "zero", "kernel": occ["name"], "expected": want, "names": [occ["name"]]})
        spec = tmp_path / "claims.json"
        spec.write_text(json.dumps(checks))
        out = run_script("claims.mjs", base, shots_dir(tmp_path), RUN="owlv2", CLAIMS_FILE=str(spec))
    assert "highlights exactly the kernels" in out


def test_reading_panel_by_serving_phase(tmp_path):
    """A built vLLM FA2 serving trace (three decode batches, two prompts, one chunked prefill beside decodes):
    the Reading panel of a call of each phase names its phase and shows every phase's expected against ran,
    extras and host vs GPU per call, as the report has them; the report's per-phase counts are the raw
    events' (tests/test_phases_serving.py's walker). An all-decode trace shows no phase table."""
    require_browser()
    from tests.make_call_phases_fixture import write_serving_logdir
    from tests.test_phases_serving import raw_reading_by_phase

    logdir = tmp_path / "logdir"
    write_serving_logdir(logdir)
    raw = raw_reading_by_phase(next((logdir / "served").glob("*.json")))
    with serving(logdir, tmp_path) as (base, proc):
        report = poll(f"{base}/data/plugin/tb_attn/report?run=served", lambda d: "reading" in d, timeout=300, proc=proc)
        (row,) = report["reading"]
        assert {p["phase"]: p["calls"] for p in row["phases"]} == {ph: v["calls"] for ph, v in raw.items()}
        for p in row["phases"]:
            assert (p["expected"]["ran_min"], p["expected"]["ran_max"]) == (min(raw[p["phase"]]["ran"]),
                                                                          max(raw[p["phase"]]["ran"]))
        poll(f"{base}/data/plugin/tb_attn/report?run=decode_only", lambda d: "reading" in d, timeout=300, proc=proc)
        out = run_script("phases.mjs", base, shots_dir(tmp_path), RUN="served", ONE_PHASE_RUN="decode_only")
    assert "the phase table shows the report's per-phase reading" in out
