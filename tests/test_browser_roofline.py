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
from tests.test_browser import CHROMIUM, FRONTEND, ROOT, SPAN, _missing, _put
from tests.test_plugin_tensorboard import poll, tensorboard_process

DEMO = ("eager", "sdpa")
LENGTH = 256


@pytest.fixture(scope="module")
def roofline_logdir(tmp_path_factory):
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("roofline_browser")
    logdir = base / "logdir"
    env = dict(os.environ, TB_ATTN_CACHE_DIR=str(base / "peak_cache"))
    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(logdir / "demo"), "--variants", *DEMO,
                           "--lengths", str(LENGTH)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
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
    why = _missing()
    if why:
        if os.environ.get("TB_ATTN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test cannot run: {why}")
        pytest.skip(why)
    logdir, runs, base = roofline_logdir
    update = os.environ.get("TB_ATTN_UPDATE_SCREENSHOTS") == "1"
    shots = ROOT / "docs" / "screenshots" if update else tmp_path / "shots"
    with tensorboard_process(logdir, tmp_path, settle_s="0", reload_s="2") as (url, proc):
        poll(f"{url}/data/plugins_listing", lambda d: d.get("tb_attn", {}).get("enabled"), proc=proc)
        env = dict(os.environ, TB_URL=url, RUNS_JSON=json.dumps(runs), SHOTS_DIR=str(shots), CHROMIUM=CHROMIUM)
        out = subprocess.run(["node", "browser/roofline.mjs"], cwd=FRONTEND, env=env, capture_output=True, text=True,
                             timeout=600)
    print(out.stdout[-20000:])
    print(out.stderr[-8000:], file=sys.stderr)
    assert out.returncode == 0, f"browser checks failed:\n{out.stderr[-4000:]}"
    assert "checks passed" in out.stdout
    for name in ("roofline", "roofline_compare"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, f"screenshot {name}.png is missing or blank"
    if update and runs["roofline"] != "h100_owlv2_eager":
        shutil.copy(shots / "roofline.png", base / "roofline_cpu.png")  # never replace the H100 shot with a CPU one
