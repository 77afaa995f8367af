"""The Memory view in a real browser: a real ``tensorboard --logdir`` over the demo's eager and SDPA
runs (recorded with memory=True at three lengths) and a run without memory events; Debian's
chromium drives frontend/browser/memory_e2e.mjs, which compares what the view shows with the
backend's /memory JSON. With TB_ATTN_UPDATE_SCREENSHOTS=1 it writes docs/screenshots/memory.png."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_browser import CHROMIUM, FRONTEND, ROOT, _missing, _put
from tests.test_plugin_tensorboard import poll, tensorboard_process

LENGTHS = (128, 256, 512)
SPAN = "1700000000000000000"


@pytest.fixture(scope="module")
def memory_logdir(tmp_path_factory, cpu_traces):
    logdir = tmp_path_factory.mktemp("browser_memory") / "logdir"
    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(logdir / "demo"), "--variants", "eager", "sdpa",
                           "--lengths", *map(str, LENGTHS)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for f in logdir.rglob("*"):
        if f.is_file():
            os.utime(f, (1_600_000_000, 1_600_000_000))
    doc = json.loads(cpu_traces["sdpa"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    _put(logdir / "no_memory" / f"worker0.{SPAN}.pt.trace.json", json.dumps(doc).encode())
    runs = {"eager": [f"demo/eager-L{n}" for n in LENGTHS], "sdpa": [f"demo/sdpa-L{n}" for n in LENGTHS], "nomem": "no_memory"}
    return logdir, runs


def test_memory_view_in_a_real_browser(memory_logdir, tmp_path):
    why = _missing()
    if why:
        if os.environ.get("TB_ATTN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test cannot run: {why}")
        pytest.skip(why)
    logdir, runs = memory_logdir
    shots = ROOT / "docs" / "screenshots" if os.environ.get("TB_ATTN_UPDATE_SCREENSHOTS") == "1" else tmp_path / "shots"
    (tmp_path / "tb").mkdir()
    with tensorboard_process(logdir, tmp_path / "tb", settle_s="0", reload_s="2") as (base, tb):
        poll(f"{base}/data/plugins_listing", lambda d: "tb_attn" in d and d["tb_attn"].get("enabled"), proc=tb)
        env = dict(os.environ, TB_URL=base, RUNS_JSON=json.dumps(runs), SHOTS_DIR=str(shots), CHROMIUM=CHROMIUM)
        proc = subprocess.run(["node", "browser/memory_e2e.mjs"], cwd=FRONTEND, env=env, capture_output=True, text=True,
                              timeout=600)
    print(proc.stdout[-20000:])
    print(proc.stderr[-8000:], file=sys.stderr)
    assert proc.returncode == 0, f"browser checks failed:\n{proc.stderr[-4000:]}"
    assert "all " in proc.stdout and "checks passed" in proc.stdout
    assert (shots / "memory.png").stat().st_size > 10_000
