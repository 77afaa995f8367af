"""A roof is measured, dated and checked (issue 47, item 2): a rate above the trace's stored roof is
flagged with the command that re-measures it, never printed as 800% of attainable; --roof /
TB_ATTN_ROOF replace the roof stored in an old trace. On a real CPU trace recorded here."""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.text import render
from tb_attn_plugin.roofline.roof import OVERRIDE_ENV

REMEASURE = "python -m tb_attn_plugin.collector.peaks --device cpu"


def qk_rate(doc) -> tuple[float, float]:
    """(FLOP/s, bytes/s) of the forward QKᵀ of the hand-written attention, from the raw events: the
    fastest ``aten::matmul`` whose inputs are [B, H, L, D] and [B, H, D, L] (2·B·H·L·L·D FLOP; reads
    Q and K, writes the L×L scores, fp32)."""
    best = (0.0, 0.0)
    for e in doc["traceEvents"]:
        dims = (e.get("args") or {}).get("Input Dims") or []
        if e.get("name") != "aten::matmul" or len(dims) < 2 or len(dims[0]) != 4 or len(dims[1]) != 4:
            continue
        (b, h, lq, d), (_, _, d2, lk) = dims[0], dims[1]
        if d != d2 or lq != lk or e.get("dur", 0) <= 0:
            continue
        flops = 2.0 * b * h * lq * lk * d
        nbytes = 4.0 * (b * h * lq * d + b * h * d * lk + b * h * lq * lk)
        s = e["dur"] * 1e-6
        if flops / s > best[0]:
            best = (flops / s, nbytes / s)
    return best


def with_roof(src, dst, tflops: float, tbs: float, **extra):
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["tb_attn"] = {"format": 1, "peaks": {"kind": "measured", "device_type": "cpu", "device": "a CPU",
                                             "source": "measured on a host (a CPU)", "method": "torch.utils.benchmark",
                                             "tflops": {"fp32": tflops}, "bandwidth_tbs": tbs, **extra}}
    dst.write_text(json.dumps(doc))
    return doc


def percents(text: str) -> list[float]:
    return [float(m) for m in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def test_a_roof_fifty_times_too_low_is_flagged_not_printed_as_percent(recorded_traces, tmp_path):
    src = recorded_traces / "eager.json.gz"
    flops_s, bytes_s = qk_rate(json.loads(gzip.decompress(src.read_bytes())))
    assert flops_s > 0
    p = tmp_path / "low.json"
    with_roof(src, p, flops_s / 50 / 1e12, bytes_s / 50 / 1e12, measured_at="2026-01-02T03:04:05Z", runs=3)
    r = analyze_file(str(p))
    rf = r["roofline"]
    assert rf["roof"]["measured_at"] == "2026-01-02T03:04:05Z" and rf["roof"]["runs"] == 3
    assert rf["roof"]["remeasure"].startswith(REMEASURE)
    qk = [s for row in rf["layers"] for s in row["stages"] if (s["stage"], s["pass"]) == ("qk_matmul", "fwd")]
    assert qk and all(s.get("above_roof") for s in qk)
    assert rf["above_roof"].startswith("1 point above the measured roof (measured 2026-01-02T03:04:05Z)")
    assert REMEASURE in rf["above_roof"]
    text = render(r)
    assert f"warning: {rf['above_roof']}" in text and "above the roof" in text
    assert all(v <= 100 for v in percents(text)), [v for v in percents(text) if v > 100]


def test_a_roof_no_cpu_reaches_is_not_flagged_and_an_override_replaces_the_stored_one(recorded_traces, tmp_path,
                                                                                    monkeypatch):
    src = recorded_traces / "eager.json.gz"
    p = tmp_path / "low.json"
    doc = with_roof(src, p, 1e-6, 1e-6)  # 1 MFLOP/s, 1 MB/s: far below any CPU
    r = analyze_file(str(p))
    assert r["roofline"].get("above_roof") and r["roofline"]["roof"].get("measured_at") is None
    assert "(when measured: not recorded)" in r["roofline"]["above_roof"]
    roof = tmp_path / "roof.json"
    roof.write_text(json.dumps({"kind": "measured", "device_type": "cpu", "tflops": {"fp32": 1000.0},
                                "bandwidth_tbs": 100.0, "measured_at": "2026-12-07T00:00:00Z", "runs": 3}))
    monkeypatch.setenv(OVERRIDE_ENV, str(roof))
    r = analyze_file(str(p))
    assert r["roofline"]["roof"]["override"] == str(roof) and r["roofline"]["roof"]["bandwidth_tbs"] == 100.0
    assert "above_roof" not in r["roofline"]
    assert not any(row.get("above_roof") for row in r["roofline"]["layers"])
    assert doc["tb_attn"]["peaks"]["bandwidth_tbs"] == 1e-6  # the trace itself is untouched
    # the CLI's --roof: the same, and a file that is no roof is one line and exit 2
    monkeypatch.delenv(OVERRIDE_ENV)
    ok = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", "-q", "--roof", str(roof), str(p)],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and f"from {roof} (--roof), not the trace's" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", "-q", "--roof", str(src), str(p)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert str(src) in bad.stderr and "Traceback" not in bad.stderr


def test_the_collector_measures_several_runs_and_dates_them(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from tb_attn_plugin.collector import peaks

    monkeypatch.setenv("TB_ATTN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(peaks, "_memo", {})
    monkeypatch.setattr(peaks, "MIN_RUN_S", 0.01)
    out = tmp_path / "roof.json"
    assert peaks.main(["--device", "cpu", "--runs", "2", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["runs"] == 2 and got["method"].startswith("best of 2 runs of torch.utils.benchmark")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", got["measured_at"])
    assert got["remeasure"].startswith(REMEASURE) and math.isfinite(got["bandwidth_tbs"])
    # what the machine's load average said, as os.getloadavg() gives it to anyone
    load, cores = __import__("os").getloadavg()[0], __import__("os").cpu_count()
    if load > peaks.LOADED * cores * 1.5:
        assert "load average" in got["note"]
    elif load < peaks.LOADED * cores * 0.5:
        assert "note" not in got
    assert list((tmp_path / "peaks").glob("*.json"))  # cached for the collector's next profile
