"""The Memory view in a real browser: a real ``tensorboard --logdir`` over the demo's eager and SDPA
runs (recorded with memory=True at three lengths) and a run without memory events; Debian's
chromium drives frontend/browser/memory_e2e.mjs, which compares what the view shows with the
backend's /memory JSON. With TB_ATTN_UPDATE_SCREENSHOTS=1 it writes docs/screenshots/memory.png."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest

from tests.browser import ROOT, require_browser, run_script, serving, shots_dir
from tests.memory_snapshots import known_snapshot, llama_training_step
from tests.test_browser import _put

LENGTHS = (128, 256, 512)
SPAN = "1700000000000000000"


@pytest.fixture(scope="module")
def memory_logdir(tmp_path_factory, cpu_traces):
    logdir = tmp_path_factory.mktemp("browser_memory") / "logdir"
    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(logdir / "demo"), "--variants", "eager", "sdpa",
                           "--lengths", *map(str, LENGTHS), "--steps", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for f in logdir.rglob("*"):
        if f.is_file():
            os.utime(f, (1_600_000_000, 1_600_000_000))
    doc = json.loads(cpu_traces["sdpa"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    _put(logdir / "no_memory" / f"worker0.{SPAN}.pt.trace.json", json.dumps(doc).encode())
    # A CUDA snapshot on its own (no trace beside it): a run with memory only.
    _put(logdir / "snapshot_only" / "host_1.1700000000.memory.pickle", pickle.dumps(known_snapshot()[0]))
    # One recorded without tb-attn (no annotations): attention found by its stack frames.
    _put(logdir / "snapshot_frames" / "step.pickle", pickle.dumps(llama_training_step()[0]))
    runs = {"eager": [f"demo/eager-L{n}" for n in LENGTHS], "sdpa": [f"demo/sdpa-L{n}" for n in LENGTHS], "nomem": "no_memory",
            "snapshot": "snapshot_only", "framed": "snapshot_frames"}
    return logdir, runs


def test_memory_view_in_a_real_browser(memory_logdir, tmp_path):
    require_browser()
    logdir, runs = memory_logdir
    shots = shots_dir(tmp_path)
    (tmp_path / "tb").mkdir()
    with serving(logdir, tmp_path / "tb") as (base, _):
        run_script("memory_e2e.mjs", base, shots, RUNS_JSON=json.dumps(runs))
    assert (shots / "memory.png").stat().st_size > 10_000
