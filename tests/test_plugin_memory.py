"""The /memory route on the real TensorBoard WSGI app: real CPU traces with memory events, a trace
with a snapshot beside it, a trace without memory, and hostile parameters."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from tests.conftest import OLD, all_settled, make_tb_app, wait_for, wait_runs
from tests.memory_snapshots import known_snapshot, malicious_pickle

P = "/data/plugin/tb_attn"


def _place(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (OLD, OLD))


@pytest.fixture(scope="module")
def app(cpu_traces, tmp_path_factory):
    root = tmp_path_factory.mktemp("memlogdir")
    for mode in ("eager", "sdpa"):
        _place(root / mode / "w.1.pt.trace.json", cpu_traces[mode].read_bytes())
    doc = json.loads(cpu_traces["eager"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    _place(root / "nomem" / "w.1.pt.trace.json", json.dumps(doc).encode())
    _place(root / "snap" / "w.1.pt.trace.json", json.dumps(doc).encode())
    _place(root / "snap" / "w.1.memory.pickle", pickle.dumps(known_snapshot()[0]))
    marker = root.parent / "PWNED"
    _place(root / "evil" / "w.1.pt.trace.json", cpu_traces["sdpa"].read_bytes())
    _place(root / "evil" / "w.1.memory.pickle", malicious_pickle(str(marker)))
    client, plugins = make_tb_app(root, tmp_path_factory.mktemp("cache"))
    wait_runs(client, lambda d: all_settled(d, ["eager", "sdpa", "nomem", "snap", "evil"]))
    yield client, marker
    plugins["tb_attn"].close()


def get(client, url):
    r = client.get(url)
    assert r.status_code != 500, r.data
    return r.status_code, json.loads(r.data)


def test_memory_of_a_run_with_bounded_points(app):
    client, _ = app
    code, body = get(client, f"{P}/memory?run=eager")
    assert code == 200 and body["run"] == "eager"
    mem = body["memory"]
    assert mem["source"] == "profiler" and mem["score_matrix"]["blocks"] > 0 and mem["peak"]["explanation"]
    code, small = get(client, f"{P}/memory?run=eager&points=50")
    curve = small["memory"]["curve"]
    assert code == 200 and len(curve["t_us"]) <= 52 and max(curve["bytes"]) == mem["peak_bytes"]
    assert len(curve["t_us"]) == len(curve["bytes"])


def test_trace_without_memory_says_how_to_record_it(app):
    client, _ = app
    code, body = get(client, f"{P}/memory?run=nomem")
    assert code == 200 and body["memory"] is None and "profile_memory=True" in body["note"]


def test_a_snapshot_beside_the_trace_is_its_memory(app):
    client, _ = app
    snap, want = known_snapshot()
    code, body = get(client, f"{P}/memory?run=snap")
    assert code == 200 and body["memory"]["source"] == "snapshot" and body["memory"]["peak_bytes"] == want["peak"]


def test_a_malicious_snapshot_is_a_warning_and_never_runs(app):
    client, marker = app
    code, report = get(client, f"{P}/report?run=evil")
    assert code == 200 and any("refused" in w for w in report["warnings"])
    assert report["memory"]["source"] == "profiler" and "snapshot_section" not in report["memory"]
    assert not marker.exists()


@pytest.mark.parametrize("query, code", [("run=eager&points=abc", 400), ("run=eager&points=10", 400),
                                         ("run=eager&points=999999", 400), ("run=nope", 404), ("", 400)])
def test_memory_parameter_errors(app, query, code):
    client, _ = app
    got, body = get(client, f"{P}/memory?{query}")
    assert got == code and body["error"]


def _memory_source(client, run):
    r = client.get(f"{P}/memory?run={run}")
    if r.status_code != 200:
        return None  # still loading
    mem = json.loads(r.data)["memory"]
    return mem and mem["source"]


def _wait(pred):
    wait_for(pred, 90.0, "the report did not change in time", interval=0.2)


def test_a_snapshot_copied_in_later_joins_and_leaving_it_out_again_undoes_it(tb_app, cpu_traces, tmp_path):
    # The run index watches the snapshots that join a trace: one copied in after the trace was
    # analysed re-analyses it (and its cache entry is a new one), one removed does too.
    doc = json.loads(cpu_traces["eager"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    logdir = tmp_path / "logdir"
    _place(logdir / "run" / "w.1.pt.trace.json", json.dumps(doc).encode())
    client, _ = tb_app(logdir)
    wait_runs(client, lambda d: all_settled(d, ["run"]))
    assert _memory_source(client, "run") is None
    snap, want = known_snapshot()
    (logdir / "run" / "w.1.memory.pickle").write_bytes(pickle.dumps(snap))
    _wait(lambda: _memory_source(client, "run") == "snapshot")
    assert json.loads(client.get(f"{P}/memory?run=run").data)["memory"]["peak_bytes"] == want["peak"]
    (logdir / "run" / "w.1.memory.pickle").unlink()
    _wait(lambda: all_settled(json.loads(client.get(f"{P}/runs").data), ["run"])
          and _memory_source(client, "run") is None)


def test_a_snapshot_linked_from_outside_the_logdir_is_never_read(tb_app, cpu_traces, tmp_path):
    doc = json.loads(cpu_traces["eager"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    logdir = tmp_path / "logdir"
    _place(logdir / "run" / "w.1.pt.trace.json", json.dumps(doc).encode())
    outside = tmp_path / "elsewhere.memory.pickle"
    outside.write_bytes(pickle.dumps(known_snapshot()[0]))
    os.symlink(outside, logdir / "run" / "w.1.memory.pickle")
    _place(logdir / "inside" / "w.1.pt.trace.json", json.dumps(doc).encode())
    _place(tmp_path / "logdir" / "inside" / "real.pickle", pickle.dumps(known_snapshot()[0]))
    os.symlink(logdir / "inside" / "real.pickle", logdir / "inside" / "w.1.memory.pickle")
    client, _ = tb_app(logdir)
    wait_runs(client, lambda d: all_settled(d, ["run", "inside"]))
    assert _memory_source(client, "run") is None  # the CLI, given the file itself, would read it
    assert _memory_source(client, "inside") == "snapshot"  # a link inside the logdir is followed


def test_a_directory_of_snapshots_only_is_a_run_with_memory_only(tb_app, cpu_traces, tmp_path):
    # Like `tb-attn report DIR`: snapshots without a trace beside them are runs of their own, shown
    # in the Memory view; the trace-only routes say what the run is (422), never a 500.
    logdir = tmp_path / "logdir"
    snap, want = known_snapshot()
    _place(logdir / "alloc" / "host_1.1700000000.memory.pickle", pickle.dumps(snap))
    _place(logdir / "mine" / "snapshot.pickle", pickle.dumps(snap))
    marker = tmp_path / "PWNED"
    _place(logdir / "evil" / "x.pickle", malicious_pickle(str(marker)))
    _place(logdir / "trace" / "w.1.pt.trace.json", cpu_traces["sdpa"].read_bytes())
    client, _ = tb_app(logdir)
    doc = wait_runs(client, lambda d: all_settled(d, ["alloc", "mine", "evil", "trace"]))
    runs = {r["run"]: r for r in doc["runs"]}
    alloc = runs["alloc"]["workers"][0]
    assert alloc["worker"] == "host_1" and alloc["spans"][0]["span"] == "1700000000"
    assert alloc["spans"][0]["summary"]["kind"] == "memory_snapshot"
    assert runs["mine"]["workers"][0]["worker"] == "snapshot" and runs["mine"]["status"] == "ready"
    assert runs["trace"]["workers"][0]["spans"][0]["summary"]["kind"] == "trace"
    evil = runs["evil"]["workers"][0]["spans"][0]
    assert evil["status"] == "error" and "refused" in evil["message"] and not marker.exists()
    for run in ("alloc", "mine"):
        code, body = get(client, f"{P}/memory?run={run}")
        assert code == 200 and body["memory"]["source"] == "snapshot" and body["memory"]["peak_bytes"] == want["peak"]
    code, report = get(client, f"{P}/report?run=alloc")
    assert code == 200 and report["kind"] == "memory_snapshot" and report["source"]["path"] == "alloc/host_1.1700000000.memory.pickle"
    for url in ("kernels?run=alloc", "call?run=alloc&id=0", "annotated?run=alloc", "compare?run=alloc&run=trace"):
        code, body = get(client, f"{P}/{url}")
        assert code == 422 and "is a CUDA memory snapshot, not a trace" in body["error"], url
    code, body = get(client, f"{P}/ranks?run=alloc")
    assert code == 200 and "not a job of several ranks" in body["not_a_job"]  # a listed run: no 404 to log
