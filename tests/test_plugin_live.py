"""Live training: runs and files appear, grow, change and vanish while TensorBoard runs."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

from tests.conftest import all_settled, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def statuses(doc, run):
    return [s["status"] for r in doc["runs"] if r["run"] == run for w in r["workers"] for s in w["spans"]]


def test_empty_logdir_then_runs_appear(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    client, plugins = tb_app(logdir)
    assert plugins["tb_attn"].index.wait_scanned(30)
    assert json.loads(client.get(f"{P}/runs").data)["runs"] == []
    assert json.loads(client.get("/data/plugins_listing").data)["tb_attn"]["enabled"] is False

    (logdir / "first").mkdir()
    shutil.copy(recorded_traces / "small.json.gz", logdir / "first" / NAME)
    doc = wait_runs(client, lambda d: all_settled(d, ["first"]))
    assert statuses(doc, "first") == ["ready"]
    assert json.loads(client.get("/data/plugins_listing").data)["tb_attn"]["enabled"] is True

    # A second span in the same run, and a run in a new nested directory.
    shutil.copy(recorded_traces / "sdpa.json.gz", logdir / "first" / "host_1.1700000000000000002.pt.trace.json.gz")
    (logdir / "exp" / "second").mkdir(parents=True)
    shutil.copy(recorded_traces / "small.json.gz", logdir / "exp" / "second" / NAME)
    doc = wait_runs(client, lambda d: all_settled(d, ["first", "exp/second"]) and len(statuses(d, "first")) == 2)
    assert statuses(doc, "first") == ["ready", "ready"]
    body = json.loads(client.get(f"{P}/report?run=first").data)
    assert body["source"]["span"] == "1700000000000000002" and body["calls"] == 2  # latest span by default

    # A run removed from disk leaves the list.
    shutil.rmtree(logdir / "exp")
    doc = wait_runs(client, lambda d: "exp/second" not in [r["run"] for r in d["runs"]])
    r = client.get(f"{P}/report?run=exp/second")
    assert r.status_code == 404


def test_trace_being_written_is_loading_until_complete(tb_app, tmp_path, recorded_traces):
    """Written in chunks faster than the settle time: never analysed half-written, never an error."""
    logdir = tmp_path / "logdir"
    (logdir / "live").mkdir(parents=True)
    client, plugins = tb_app(logdir, env={"TB_ATTN_SETTLE_S": "3"})
    assert plugins["tb_attn"].index.wait_scanned(30)
    data = (recorded_traces / "sdpa.json.gz").read_bytes()
    path = logdir / "live" / NAME
    done = threading.Event()

    def writer():
        with open(path, "wb") as fh:
            for i in range(0, len(data), len(data) // 12 + 1):
                fh.write(data[i:i + len(data) // 12 + 1])
                fh.flush()
                os.fsync(fh.fileno())
                time.sleep(0.25)
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    while not done.is_set():
        seen.update(statuses(json.loads(client.get(f"{P}/runs").data), "live"))
        r = client.get(f"{P}/report?run=live")
        assert r.status_code in (202, 404), r.data  # 404 only before the first scan sees the file
        time.sleep(0.1)
    t.join()
    assert seen <= {"loading"} and seen
    doc = wait_runs(client, lambda d: all_settled(d, ["live"]))
    assert statuses(doc, "live") == ["ready"]
    assert json.loads(client.get(f"{P}/report?run=live").data)["calls"] == 2


def test_rewritten_trace_is_analysed_again(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    (logdir / "run").mkdir(parents=True)
    path = logdir / "run" / NAME
    shutil.copy(recorded_traces / "sdpa.json.gz", path)
    os.utime(path, (1_600_000_000, 1_600_000_000))
    client, _ = tb_app(logdir)
    wait_runs(client, lambda d: all_settled(d, ["run"]))
    assert json.loads(client.get(f"{P}/report?run=run").data)["implementations"][0]["implementation"] == "cpu_fused"

    shutil.copy(recorded_traces / "math.json.gz", path)
    wait_runs(client, lambda d: all_settled(d, ["run"]) and
              any(s.get("summary", {}).get("implementations") == ["math"]
                  for r in d["runs"] for w in r["workers"] for s in w["spans"]))
    body = json.loads(client.get(f"{P}/report?run=run").data)
    assert body["implementations"][0]["implementation"] == "math"


def test_missing_logdir_is_reported_and_picked_up_once_created(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "not-yet"
    client, plugins = tb_app(logdir)
    assert plugins["tb_attn"].index.wait_scanned(30)
    doc = json.loads(client.get(f"{P}/runs").data)
    assert doc["runs"] == [] and "cannot list the logdir" in doc["error"]
    assert plugins["tb_attn"].is_active() is False

    (logdir / "run").mkdir(parents=True)
    shutil.copy(recorded_traces / "small.json.gz", logdir / "run" / NAME)
    doc = wait_runs(client, lambda d: all_settled(d, ["run"]))
    assert "error" not in doc
