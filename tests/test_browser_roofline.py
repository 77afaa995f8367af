"""The Roofline view and Compare's decomposition in a real browser: a real ``tensorboard --logdir``
over the demo's eager and SDPA CPU runs (profiled here through the collector, which records the
measured CPU roof) and, when ../shared is present, the H100 OWLv2 eager trace (data-sheet roof);
Debian's chromium driven by playwright-core (frontend/browser/roofline.mjs) compares what it shows
with the backend's JSON and hovers a point. With TB_ATTN_UPDATE_SCREENSHOTS=1 the screenshots go to
docs/screenshots/ (roofline.png, roofline_compare.png)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import SHARED_TRACES
from tests.browser import ROOT, require_browser, run_script, serving, shots_dir, updating_screenshots
from tests.test_browser import SPAN, _put

DEMO = ("eager", "sdpa")
LENGTH = 256


@pytest.fixture(scope="module")
def roofline_logdir(tmp_path_factory):
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("roofline_browser")
    logdir = base / "logdir"
    env = dict(os.environ, TB_ATTN_CACHE_DIR=str(base / "peak_cache"))
    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(logdir / "demo"), "--variants", *DEMO,
                           "--lengths", str(LENGTH), "--steps", "1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for f in logdir.rglob("*"):
        if f.is_file():
            os.utime(f, (1_600_000_000, 1_600_000_000))
    runs = {"a": f"demo/eager-L{LENGTH}", "b": f"demo/sdpa-L{LENGTH}", "roofline": f"demo/eager-L{LENGTH}"}
    owl = SHARED_TRACES / "tl_h100_owlv2_eager_bmm_softmax.json.gz"
    if owl.exists():  # the data-sheet roof of a real H100 trace; without ../shared the CPU run stands in
        _put(logdir / "h100_owlv2_eager" / f"worker0.{SPAN}.pt.trace.json.gz", owl.read_bytes())
        runs["roofline"] = "h100_owlv2_eager"
    return logdir, runs, base


def test_roofline_view_and_decomposition_in_a_real_browser(roofline_logdir, tmp_path):
    require_browser()
    logdir, runs, base = roofline_logdir
    shots = shots_dir(tmp_path)
    with serving(logdir, tmp_path) as (url, _):
        run_script("roofline.mjs", url, shots, RUNS_JSON=json.dumps(runs))
    for name in ("roofline", "roofline_compare"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, f"screenshot {name}.png is missing or blank"
    if updating_screenshots() and runs["roofline"] != "h100_owlv2_eager":
        shutil.copy(shots / "roofline.png", base / "roofline_cpu.png")  # never replace the H100 shot with a CPU one
