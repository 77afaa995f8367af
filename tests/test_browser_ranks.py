"""The Ranks view in a real browser: a real ``tensorboard --logdir`` over a job of eight ranks built
from the suite's own CPU traces (one rank 1.6x slower, one on SDPA's math backend), Debian's
chromium driven by playwright-core (frontend/browser/e2e_ranks.mjs). With
TB_ATTN_UPDATE_SCREENSHOTS=1 the screenshot goes to docs/screenshots/ranks.png."""

from __future__ import annotations

import os

from tb_attn_plugin.report.build import analyze_file
from tests.rank_jobs import write_job
from tests.browser import require_browser, run_script, serving, shots_dir

# Ranks 0-7: near-equal, rank 5 1.6x slower, rank 6 recorded with SDPA pinned to the math backend.
SLOW = {0: 1.0, 1: 1.03, 2: 0.97, 3: 1.05, 4: 0.99, 5: 1.6, 7: 1.02}


def test_ranks_view_in_a_real_browser(cpu_traces, tmp_path):
    require_browser()
    logdir = tmp_path / "logdir"
    sources = {r: cpu_traces["sdpa"] for r in SLOW} | {6: cpu_traces["math"]}
    # The math trace is stretched to the SDPA one's attention time, so that rank 5 (1.6x) stays the
    # slowest whatever the two recordings took on this machine.
    sdpa, math = (analyze_file(str(cpu_traces[m]))["attention_cpu_us"] for m in ("sdpa", "math"))
    write_job(logdir / "job", dict(sorted(sources.items())), slow=SLOW | {6: sdpa / math})
    # A trace of the same run without any rank (the launcher's): named as left out, not a row.
    (logdir / "job" / "launcher.1700000000099.pt.trace.json").write_bytes(cpu_traces["sdpa"].read_bytes())
    for f in (logdir / "job").iterdir():
        os.utime(f, (1_600_000_000, 1_600_000_000))
    shots = shots_dir(tmp_path)
    with serving(logdir, tmp_path) as (base, _):
        out = run_script("e2e_ranks.mjs", base, shots, JOB="job")
    assert "the trace without a rank (launcher) is named as left out" in out
    assert "rank 5 is marked slowest" in out and "rank 6's other backend is named" in out
    assert (shots / "ranks.png").stat().st_size > 10_000
