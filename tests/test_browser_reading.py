"""The Reading panel (issue 25 item 7) in a real browser: a real ``tensorboard --logdir`` over the post's
variants that ``python -m demo --post`` records on the CPU (and the shared H100 BERT flash trace when
present), driven by frontend/browser/reading.mjs. TB_ATTN_UPDATE_SCREENSHOTS=1 writes
docs/screenshots/reading.png (and reading_gpu.png with the shared traces)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.browser import ROOT, require_browser, run_script, serving, shots_dir
from tests.conftest import SHARED_TRACES
from tests.test_browser import SPAN

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
