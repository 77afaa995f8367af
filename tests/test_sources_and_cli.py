"""Where traces come from (paths, run directories, logdirs, fsspec URLs) and what the CLI prints."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys

import pytest

from tb_attn_plugin.cli_common import ProgressBar
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace.discover import find_traces, parse_name
from tests.conftest import recorded_trace


def test_trace_handler_names():
    assert parse_name("host_123.1733000000000000.pt.trace.json.gz") == ("host_123", "1733000000000000")
    assert parse_name("rank1.host.99.pt.trace.json") == ("rank1.host", "99")
    assert parse_name("notes.json") is None


def test_logdir_discovery(tmp_path):
    src = recorded_trace("small")
    for run, worker, span in [("a", "w0", "10"), ("a", "w0", "2"), ("a", "w1", "5"), ("b/c", "w0", "7")]:
        d = tmp_path / run
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, d / f"{worker}.{span}.pt.trace.json.gz")
    (tmp_path / "a" / "events.out.tfevents.1").write_bytes(b"x")
    found = [(t.run, t.worker, t.span) for t in find_traces(str(tmp_path))]
    assert found == [("a", "w0", "2"), ("a", "w0", "10"), ("a", "w1", "5"), ("b/c", "w0", "7")]


def test_fsspec_memory_url():
    fsspec = pytest.importorskip("fsspec")
    data = recorded_trace("sdpa").read_bytes()
    fs = fsspec.filesystem("memory")
    with fs.open("/traces/w.1.pt.trace.json.gz", "wb") as fh:
        fh.write(data)
    r = analyze_file("memory://traces/w.1.pt.trace.json.gz")
    assert r["calls"] == 2 and r["source"]["worker"] == "w"
    assert r["source"]["size_bytes"] == len(data) and r["source"]["json_bytes"] == len(gzip.decompress(data))


def test_progress_bar_only_after_the_delay():
    out = io.StringIO()
    bar = ProgressBar("trace.json", stream=out, delay=60)
    bar("decoding", 0.5)
    assert out.getvalue() == ""
    bar = ProgressBar("trace.json", stream=out, delay=0)
    bar("decoding", 0.5)
    bar("done", 1.0)
    assert "trace.json" in out.getvalue() and "decoding" in out.getvalue()


def test_cli_on_a_logdir_prints_every_run(tmp_path):
    for run, name in [("eager", "eager"), ("flash", "sdpa")]:
        (tmp_path / run).mkdir()
        shutil.copy(recorded_trace(name), tmp_path / run / "w.1.pt.trace.json.gz")
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(tmp_path), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "eager attention in 2 calls: " in out and "% of attention time" in out
    assert "fused attention running: cpu_fused in 2 calls" in out
    assert out.index("eager") < out.index("flash")
    for stage in ("qk_matmul", "softmax", "av_matmul", "fused"):
        assert stage in out


def test_cli_errors_on_an_empty_directory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith(f"tb-attn: error: {tmp_path}: no trace files")


def test_cli_compare_eager_against_flash(tmp_path):
    for run, name in [("eager", "eager"), ("flash", "sdpa")]:
        (tmp_path / run).mkdir()
        shutil.copy(recorded_trace(name), tmp_path / run / "w.1.pt.trace.json.gz")
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "compare", str(tmp_path / "eager"),
                           str(tmp_path / "flash"), "-q"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("flash vs eager: cannot tell whether this is noise: attention ") and "CPU time" in first
    assert "implementation eager -> cpu_fused" in first
    table = [line.split() for line in proc.stdout.splitlines()[5:] if line.strip() and " fwd " in line or " bwd " in line]
    changes = [float(row[-3].lstrip("-")) * (1e3 if row[-2] == "ms" else 1) for row in table if row[-2] in ("µs", "ms")]
    assert changes and changes == sorted(changes, reverse=True)  # the largest change comes first
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "compare", str(tmp_path / "eager")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "at least two" in proc.stderr
