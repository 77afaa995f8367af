"""The /memory route on the real TensorBoard WSGI app: real CPU traces with memory events, a trace
with a snapshot beside it, a trace without memory, and hostile parameters."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from tests.conftest import OLD, all_settled, make_tb_app, wait_runs
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
