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
