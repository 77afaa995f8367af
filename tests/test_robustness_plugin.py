"""The plugin under load and in hostile logdirs, over the real TensorBoard WSGI app.

* 32 concurrent HTTP clients on 127.0.0.1, a fixed number of requests each, on every JSON route,
  while a writer adds new runs to the logdir (written in chunks, as live training does): no 5xx, no
  4xx other than the ones the logdir calls for, and at the end every run is listed and ready.
* A logdir with a thousand small runs: all listed, all analysed, a report for any of them.
* A read-only logdir with an unwritable cache directory: everything works from memory and nothing is
  ever written into the logdir (tests run as root, where chmod stops nothing, so the listing and the
  mtimes are compared instead).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import all_settled, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"
OLD = 1_600_000_000
GOOD = {"small": 1, "sdpa": 2, "math": 2}


def place(dst, data: bytes, mtime: float | None = OLD) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    if mtime is not None:
        os.utime(dst, (mtime, mtime))


class Server:
    """The WSGI app on a free loopback port, served by werkzeug's threaded server as TensorBoard does."""

    def __init__(self, app):
        from werkzeug.serving import make_server

        self.httpd = make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self.httpd.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.thread.join(10)


@pytest.fixture
def serve():
    made = []

    def start(client):
        s = Server(client.application)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


def q(run: str) -> str:
    return urllib.parse.quote(run, safe="")


# -- concurrent load while runs appear ----------------------------------------------------------------

CLIENTS, REQUESTS_EACH, NEW_RUNS = 32, 20, 16


def test_concurrent_clients_while_new_runs_appear(tb_app, serve, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    blobs = {n: (recorded_traces / f"{n}.json.gz").read_bytes() for n in GOOD}
    for i, n in enumerate(GOOD):
        place(logdir / f"seed{i}" / NAME, blobs[n])
    place(logdir / "bad" / NAME, b"\x1f\x8b\x08\x00 not deflate" * 20)
    client, plugins = tb_app(logdir)
    srv = serve(client)
    assert plugins["tb_attn"].index.wait_scanned(30)

    known: set[str] = set()  # runs some client has seen listed; runs never vanish in this test
    good: set[str] = set()
    lock = threading.Lock()
    bad_answers: list[str] = []
    counts: dict[int, int] = {}

    def note(route: str, status: int, body: bytes, allowed: set[int]) -> None:
        with lock:
            counts[status] = counts.get(status, 0) + 1
            if status not in allowed:
                bad_answers.append(f"{route} -> {status} {body[:200]!r}")

    expected_calls = {f"seed{i}": GOOD[n] for i, n in enumerate(GOOD)}
    plan = [(f"live/run{i:02d}", list(GOOD)[i % len(GOOD)]) for i in range(NEW_RUNS)]
    expected_calls.update({run: GOOD[n] for run, n in plan})

    def writer() -> None:
        for run, n in plan:  # chunked, fsync'd writes with fresh mtimes: files visibly growing
            data, path = blobs[n], logdir / run / NAME
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                step = len(data) // 3 + 1
                for j in range(0, len(data), step):
                    fh.write(data[j:j + step])
                    fh.flush()
                    os.fsync(fh.fileno())
                    time.sleep(0.02)
            time.sleep(0.05)

    def one_client(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(REQUESTS_EACH):
            with lock:
                runs_now, good_now = sorted(known), sorted(good)
            kind = rnd.choice(["runs", "runs", "report", "report", "kernels", "call", "compare", "listing", "static"])
            if kind == "runs" or not good_now:
                status, body = srv.get(f"{P}/runs")
                note("/runs", status, body, {200})
                if status == 200:
                    doc = json.loads(body)
                    with lock:
                        for r in doc["runs"]:
                            known.add(r["run"])
                            if r["run"] != "bad":
                                good.add(r["run"])
            elif kind == "report":
                run = rnd.choice(runs_now)
                status, body = srv.get(f"{P}/report?run={q(run)}")
                # the broken run answers 422 once analysed (202 before); every listed good run 200 or 202
                note(f"/report {run}", status, body, {202, 422} if run == "bad" else {200, 202})
                if status == 200:
                    ids = [s["id"] for s in json.loads(body)["call_samples"]]
                    if ids:
                        status, body = srv.get(f"{P}/call?run={q(run)}&id={rnd.choice(ids)}")
                        note(f"/call {run}", status, body, {200})
            elif kind == "kernels":
                run = rnd.choice(good_now)
                status, body = srv.get(f"{P}/kernels?run={q(run)}&stage=fused&pass=fwd")
                note(f"/kernels {run}", status, body, {200, 202})
            elif kind == "call":
                run = rnd.choice(good_now)
                status, body = srv.get(f"{P}/call?run={q(run)}&id=0")  # every good run's first call has id 0
                note(f"/call {run}", status, body, {200, 202})
            elif kind == "compare":
                a, b = (rnd.sample(good_now, 2) if len(good_now) > 1 else (good_now[0], good_now[0] + "x"))
                status, body = srv.get(f"{P}/compare?run={q(a)}&run={q(b)}")
                note(f"/compare {a} {b}", status, body, {200, 202} if len(good_now) > 1 else {404})
            elif kind == "listing":
                status, body = srv.get("/data/plugins_listing")
                note("/data/plugins_listing", status, body, {200})
            else:
                status, body = srv.get(f"{P}/index.js")
                note("/index.js", status, body, {200})

    w = threading.Thread(target=writer)
    w.start()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(one_client, range(CLIENTS)))
    w.join()
    assert not bad_answers, f"{len(bad_answers)} unexpected answers, e.g. {bad_answers[:5]}; all: {counts}"
    assert sum(counts.values()) >= CLIENTS * REQUESTS_EACH

    # No lost runs: every run written is listed, analysed and served.
    doc = wait_runs(client, lambda d: all_settled(d, list(expected_calls) + ["bad"]), timeout=180)
    listed = {r["run"]: r["status"] for r in doc["runs"]}
    assert listed == {**{run: "ready" for run in expected_calls}, "bad": "error"}
    for run, calls in expected_calls.items():
        status, body = srv.get(f"{P}/report?run={q(run)}")
        assert status == 200, (run, body[:200])
        assert json.loads(body)["calls"] == calls


# -- a thousand runs ----------------------------------------------------------------------------------

THOUSAND = 1000


def test_a_thousand_small_runs(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    data = (recorded_traces / "small.json.gz").read_bytes()
    for i in range(THOUSAND):  # grouped like sweeps are: exp{k}/trial{i}
        place(logdir / f"exp{i // 100}" / f"trial{i:04d}" / NAME, data)
    client, plugins = tb_app(logdir, env={"TB_ATTN_WORKERS": "2"})
    names = [f"exp{i // 100}/trial{i:04d}" for i in range(THOUSAND)]
    # Polled once a second: each /runs answer is a 1000-run document, and the machine has 2 cores.
    deadline = time.monotonic() + 300
    while True:
        doc = json.loads(client.get(f"{P}/runs").data)
        if len(doc["runs"]) == THOUSAND and all_settled(doc):
            break
        assert time.monotonic() < deadline, f"not all {THOUSAND} runs ready in 300 s: {len(doc['runs'])} listed"
        time.sleep(1.0)
    assert [r["run"] for r in doc["runs"]] == sorted(names)
    assert {r["status"] for r in doc["runs"]} == {"ready"}
    assert all(s["summary"]["calls"] == 1 for r in doc["runs"] for w in r["workers"] for s in w["spans"])
    for run in (names[0], names[THOUSAND // 2], names[-1]):
        r = client.get(f"{P}/report?run={q(run)}")
        assert r.status_code == 200 and json.loads(r.data)["calls"] == 1
    r = client.get(f"{P}/compare?" + "&".join(f"run={q(n)}" for n in names[:8]))
    assert r.status_code == 200
    r = client.get(f"{P}/report?run=exp9/trial9999")
    assert r.status_code == 404 and "and 980 more" in json.loads(r.data)["error"]  # the hint stays short
    assert json.loads(client.get("/data/plugins_listing").data)["tb_attn"]["enabled"] is True


# -- read-only logdir, unwritable cache ---------------------------------------------------------------

def snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_size, st.st_mtime_ns)
    st = os.lstat(root)
    out["."] = (stat.S_IFMT(st.st_mode), st.st_mode & 0o7777, st.st_size, st.st_mtime_ns)
    return out


def test_read_only_logdir_with_unwritable_cache(tb_app, tmp_path, recorded_traces):
    logdir = tmp_path / "logdir"
    for n, calls in GOOD.items():
        place(logdir / n / NAME, (recorded_traces / f"{n}.json.gz").read_bytes())
    place(logdir / "broken" / NAME, b"{not json")
    place(logdir / "plain" / "host_1.5.pt.trace.json", b"")  # empty: an error, not a crash
    for dirpath, dirnames, filenames in os.walk(logdir, topdown=False):
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o444)
        os.chmod(dirpath, 0o555)
    before = snapshot(logdir)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("the cache directory would have to be created inside this file")
    try:
        client, plugins = tb_app(logdir, cache_dir=blocker / "cache")
        assert plugins["tb_attn"].index.cache.on_disk is False
        doc = wait_runs(client, lambda d: all_settled(d, list(GOOD) + ["broken", "plain"]))
        assert {r["run"]: r["status"] for r in doc["runs"]} == {**{n: "ready" for n in GOOD}, "broken": "error",
                                                                "plain": "error"}
        for n, calls in GOOD.items():
            r = client.get(f"{P}/report?run={n}")
            assert r.status_code == 200 and json.loads(r.data)["calls"] == calls
            assert client.get(f"{P}/kernels?run={n}").status_code == 200
            assert client.get(f"{P}/call?run={n}&id=0").status_code == 200
        assert client.get(f"{P}/compare?" + "&".join(f"run={n}" for n in GOOD)).status_code == 200
        assert client.get(f"{P}/report?run=broken").status_code == 422
        # The CLI over the same logdir, with an unwritable home and cache as well.
        env = dict(os.environ, HOME=str(blocker), XDG_CACHE_HOME=str(blocker), TB_ATTN_CACHE_DIR=str(blocker / "c"))
        proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(logdir), "--json", "-q"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert "Traceback" not in proc.stderr
        assert proc.returncode == 2 and proc.stdout.strip()  # two bad files: exit 2, good reports printed
        plugins["tb_attn"].close()
        assert snapshot(logdir) == before  # not a file, directory, mode or mtime changed
        assert blocker.read_text().startswith("the cache")
    finally:
        for dirpath, dirnames, filenames in os.walk(logdir):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(logdir, ignore_errors=True)
