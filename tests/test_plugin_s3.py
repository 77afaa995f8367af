"""An s3:// logdir, served by a local S3-compatible server (moto) on the loopback, read with s3fs."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from tests.conftest import all_settled, wait_runs

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(monkeypatch):
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
                 "NO_PROXY": "127.0.0.1,localhost"}.items():
        monkeypatch.setenv(k, v)
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
    fs.mkdir("logs")
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()
    # moto keeps its buckets per process, not per server: forget them for the next test's server.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).close()
    server.stop()


def test_s3_logdir(tb_app, s3, recorded_traces):
    s3.pipe(f"logs/exp/flash/{NAME}", (recorded_traces / "sdpa.json.gz").read_bytes())
    s3.pipe(f"logs/exp/broken/{NAME}", b"{not json")
    s3.pipe("logs/exp/flash/readme.json", b"{}")  # not a trace name: ignored
    client, plugins = tb_app("s3://logs/exp")
    doc = wait_runs(client, lambda d: all_settled(d, ["flash", "broken"]))
    by_run = {r["run"]: r for r in doc["runs"]}
    assert sorted(by_run) == ["broken", "flash"]
    assert by_run["flash"]["status"] == "ready" and by_run["broken"]["status"] == "error"
    r = client.get(f"{P}/report?run=flash")
    body = json.loads(r.data)
    assert r.status_code == 200 and body["calls"] == 2 and body["source"]["path"] == f"flash/{NAME}"
    assert client.get(f"{P}/report?run=broken").status_code == 422

    # Live training on object storage: a new run appears on a later listing.
    s3.pipe(f"logs/exp/small/{NAME}", (recorded_traces / "small.json.gz").read_bytes())
    doc = wait_runs(client, lambda d: all_settled(d, ["flash", "broken", "small"]))
    assert json.loads(client.get(f"{P}/report?run=small").data)["calls"] == 1
    assert client.get(f"{P}/report?run=s3://logs/exp/flash").status_code == 404
