"""What every answer of the plugin's routes may hold: no absolute path of the server (warnings
included), ``nosniff`` on every answer (the /annotated download too), and a JSON body for every
error, also for a path under the plugin's prefix that no route serves.

Over the real TensorBoard WSGI app (tests/conftest.py: make_tb_app) and a logdir of recorded CPU
traces, one with a snapshot beside it that the safe unpickler refuses (tests/memory_snapshots.py).
"""

from __future__ import annotations

import gzip
import json
import os

import pytest

from tests.conftest import OLD, all_settled, make_tb_app, recorded_trace, wait_runs
from tests.memory_snapshots import malicious_pickle

P = "/data/plugin/tb_attn"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bodies")
    root = tmp / "logdir"
    for run in ("a", "evil"):
        (root / run).mkdir(parents=True)
        (root / run / "w.1.pt.trace.json").write_bytes(gzip.decompress(recorded_trace("sdpa").read_bytes()))
    (root / "evil" / "w.1.memory.pickle").write_bytes(malicious_pickle(str(tmp / "PWNED")))
    for f in root.rglob("*"):
        if f.is_file():
            os.utime(f, (OLD, OLD))
    client, plugins = make_tb_app(root, tmp / "cache")
    wait_runs(client, all_settled)
    yield client, str(tmp)
    plugins["tb_attn"].close()


def test_a_refused_snapshot_is_named_relative_to_the_logdir(app):
    """Was: "memory snapshot /abs/path/.../evil/w.1.memory.pickle: refused: ..." in /report and /compare."""
    client, tmp = app
    r = client.get(f"{P}/report?run=evil")
    assert r.status_code == 200
    warnings = json.loads(r.data)["warnings"]
    assert any("refused" in w and "evil/w.1.memory.pickle" in w for w in warnings), warnings
    assert tmp.encode() not in r.data
    r = client.get(f"{P}/compare?run=a&run=evil")
    assert r.status_code == 200 and tmp.encode() not in r.data, r.data[:300]


def test_the_annotated_download_says_nosniff(app):
    client, tmp = app
    r = client.get(f"{P}/annotated?run=a")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/gzip"
    assert r.headers.get("X-Content-Type-Options") == "nosniff"


@pytest.mark.parametrize("path", ["/report/x", "/index.js/x", "/static/", "/nope", "/runs/../report", "/call/1"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_paths_no_route_serves_answer_a_json_404(app, path, method):
    """Was TensorBoard's plain-text "Not found" for anything under the prefix that no route matched."""
    client, tmp = app
    r = client.open(P + path, method=method)
    assert r.status_code == 404 and r.headers["Content-Type"].startswith("application/json"), (r.status_code, r.data)
    assert r.headers.get("X-Content-Type-Options") == "nosniff"
    if method == "GET":
        body = json.loads(r.data)
        assert "no route" in body["error"] and "/report" in body["error"]


def test_a_backtracking_pattern_in_tb_attn_patterns_does_not_hang_the_workers(tmp_path):
    """``(a|aa)+$`` (no nested quantifier, so the old check let it through) against a kernel named
    'a'x44+'!' kept a TensorBoard worker busy for minutes; on RE2 the run is ready like any other."""
    doc = json.loads(gzip.decompress(recorded_trace("sdpa").read_bytes()))
    op = next(e for e in doc["traceEvents"] if e.get("name") == "aten::scaled_dot_product_attention")
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "a" * 44 + "!", "pid": 0, "tid": 7,
                               "ts": op["ts"] + 1, "dur": 3, "args": {"correlation": 99991}})
    root = tmp_path / "logdir"
    (root / "run").mkdir(parents=True)
    (root / "run" / "w.1.pt.trace.json").write_text(json.dumps(doc))
    os.utime(root / "run" / "w.1.pt.trace.json", (OLD, OLD))
    table = tmp_path / "slow.toml"
    table.write_text('[[family]]\nname = "backtracker"\npattern = "(a|aa)+$"\nstage = "fused"\npass = "fwd"\n'
                     'example = "aaaa"\nsource = "issue 27"\n')
    client, plugins = make_tb_app(root, tmp_path / "cache", env={"TB_ATTN_PATTERNS": str(table)})
    try:
        wait_runs(client, all_settled, timeout=90)
        r = client.get(f"{P}/report?run=run")
        assert r.status_code == 200
        assert json.loads(r.data)["kernel_table"]["user_families"] == 1
    finally:
        plugins["tb_attn"].close()
