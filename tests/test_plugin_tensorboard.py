"""A real ``tensorboard`` process on a free loopback port finds the plugin through its entry point,
next to torch-tb-profiler's PyTorch Profiler tab, and serves a report over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import PLUGIN_RUNS, all_settled

NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def poll(url: str, pred, timeout: float = 120.0, proc=None):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"tensorboard exited with {proc.returncode}")
        try:
            last = fetch(url)
            if last[0] == 200 and pred(json.loads(last[2])):
                return json.loads(last[2])
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} never answered as expected; last answer: {last}")


@pytest.fixture
def tensorboard(tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    for run in ("sdpa", "math"):
        (logdir / run).mkdir(parents=True)
        shutil.copy(recorded_traces / f"{PLUGIN_RUNS[run]}.json.gz", logdir / run / NAME)
    with tensorboard_process(logdir, tmp_path, settle_s="1", reload_s="1") as (base, proc):
        yield base, proc


@contextlib.contextmanager
def tensorboard_process(logdir, tmp, *, settle_s: str, reload_s: str):
    """A real `tensorboard` on a free loopback port, its cache in ``tmp``; stopped on exit."""
    port = free_port()
    env = dict(os.environ, TB_ATTN_CACHE_DIR=str(tmp / "cache"), TB_ATTN_SETTLE_S=settle_s)
    log = open(tmp / "tensorboard.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
                             "--port", str(port), "--load_fast", "false", "--reload_interval", reload_s],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        if proc.returncode not in (0, -15):
            print((tmp / "tensorboard.log").read_text(errors="replace")[-4000:])


def test_real_tensorboard_serves_the_plugin(tensorboard):
    base, proc = tensorboard
    listing = poll(f"{base}/data/plugins_listing", lambda d: d.get("tb_attn", {}).get("enabled"), proc=proc)
    assert listing["tb_attn"]["tab_name"] == "Attention"
    if "pytorch_profiler" in listing:  # torch-tb-profiler installed: both tabs, same logdir
        assert listing["pytorch_profiler"]["enabled"] is True

    doc = poll(f"{base}/data/plugin/tb_attn/runs", all_settled, proc=proc)
    assert [r["run"] for r in doc["runs"]] == ["math", "sdpa"]
    status, ctype, body = fetch(f"{base}/data/plugin/tb_attn/report?run=sdpa")
    assert status == 200 and ctype.startswith("application/json")
    assert json.loads(body)["implementations"][0]["implementation"] == "cpu_fused"
    status, ctype, body = fetch(f"{base}/data/plugin/tb_attn/report?run=..%2F..%2Fetc%2Fpasswd")
    assert status == 404 and ctype.startswith("application/json") and "no run named" in json.loads(body)["error"]


def test_pytorch_profiler_tab_loads_the_same_logdir(tensorboard):
    pytest.importorskip("torch_tb_profiler")
    base, proc = tensorboard
    prof = poll(f"{base}/data/plugin/pytorch_profiler/runs", lambda d: len(d.get("runs", [])) == 2, proc=proc)
    ours = poll(f"{base}/data/plugin/tb_attn/runs", all_settled, proc=proc)
    assert sorted(prof["runs"]) == sorted(r["run"] for r in ours["runs"])
    status, _, body = fetch(f"{base}/data/plugin/pytorch_profiler/views?run=sdpa")
    assert status == 200 and "Overview" in json.loads(body)
    status, _, body = fetch(f"{base}/data/plugin/tb_attn/compare?run=sdpa&run=math")
    assert status == 200 and json.loads(body)["time_basis"] == "cpu"
