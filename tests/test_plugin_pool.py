"""Analysis processes that die (killed for memory, crashed) cost one file, never the plugin."""

from __future__ import annotations

import gzip
import os
import shutil
import signal

from tests.conftest import all_settled, wait_for, wait_runs

NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def test_worker_killed_mid_analysis_is_retried_then_reported(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    (logdir / "big").mkdir(parents=True)
    # The recorded eager trace repeated into ~300,000 events: about a second to analyse, long
    # enough to be killed mid-way.
    from tests.test_robustness_large import build

    big = logdir / "big" / NAME.removesuffix(".gz")
    build(big, gzip.decompress((recorded_traces / "eager.json.gz").read_bytes()), 300_000)
    os.utime(big, (1_600_000_000, 1_600_000_000))
    client, plugins = tb_app(logdir, env={"TB_ATTN_WORKERS": "1"})
    index = plugins["tb_attn"].index
    wait_for(lambda: index.has_traces())
    entry = index.lookup("big")
    killed = set()
    for attempt in (1, 2):
        # Wait for the analysis to be in a live worker process, then kill that process.
        wait_for(lambda: entry.phase == "running" and index.pool.executor is not None
                 and any(p.pid not in killed and p.is_alive() for p in index.pool.executor._processes.values()))
        for p in list(index.pool.executor._processes.values()):
            killed.add(p.pid)
            os.kill(p.pid, signal.SIGKILL)
        wait_for(lambda: entry.attempts >= attempt or entry.status == "error")
    doc = wait_runs(client, lambda d: all_settled(d, ["big"]))
    span = doc["runs"][0]["workers"][0]["spans"][0]
    assert span["status"] == "error" and "analysis process died" in span["message"], span
    r = client.get("/data/plugin/tb_attn/report?run=big")
    assert r.status_code == 422 and b"died" in r.data

    # The pool starts afresh: the next trace is analysed normally.
    (logdir / "small").mkdir()
    shutil.copy(recorded_traces / "small.json.gz", logdir / "small" / NAME)
    wait_runs(client, lambda d: all_settled(d, ["big", "small"]))
    assert client.get("/data/plugin/tb_attn/report?run=small").status_code == 200


def test_more_files_than_a_worker_may_take_all_finish_then_workers_are_replaced(tmp_path, recorded_traces):
    """A queue longer than TASKS_PER_WORKER on one worker drains (ProcessPoolExecutor's own
    max_tasks_per_child deadlocks here on Python 3.11-3.13), and once idle the pool swaps its
    processes for fresh ones."""
    from tb_attn_plugin.plugin.pool import TASKS_PER_WORKER, AnalysisPool

    trace = tmp_path / NAME
    shutil.copy(recorded_traces / "small.json.gz", trace)
    pool = AnalysisPool(workers=1)
    try:
        jobs = [pool.submit(str(trace), f"file {i}") for i in range(3 * TASKS_PER_WORKER)]
        results = [fut.result(timeout=300) for fut, _ in jobs]
        assert [r[0] for r in results] == ["ready"] * len(jobs), [r[1] for r in results if r[0] != "ready"]
        assert len({id(ex) for _, ex in jobs}) == 1  # busy all along: never two sets of workers at once
        first_pids = set(jobs[0][1]._processes)
        fut, ex = pool.submit(str(trace), "after the queue drained")
        assert ex is not jobs[0][1]
        assert fut.result(timeout=300)[0] == "ready"
        assert not first_pids & set(ex._processes)
    finally:
        pool.close()
