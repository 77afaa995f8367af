"""Analyses on a real Dask LocalCluster (two worker processes): the same reports as in-process, a
bad trace fails alone, a worker killed mid-task is replaced and its task rerun, and the plugin
uses the cluster when TB_ATTN_DASK_SCHEDULER is set."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import msgspec
import pytest

distributed = pytest.importorskip("distributed", reason="the [dask] extra is not installed")
import dask  # noqa: E402  (installed with distributed)

from tb_attn_plugin import cli  # noqa: E402
from tb_attn_plugin.cluster import dask_jobs  # noqa: E402
from tb_attn_plugin.format.errors import TraceError  # noqa: E402
from tb_attn_plugin.report.build import analyze_file  # noqa: E402
from tests.conftest import all_settled, wait_runs  # noqa: E402
from tests.rank_jobs import write_job  # noqa: E402
try:
    from tests.test_plugin_s3 import s3  # noqa: F401  (the fixture: a local S3 server, moto + s3fs)
except pytest.skip.Exception:  # s3fs or moto not installed: only the S3 test skips, not this module
    @pytest.fixture
    def s3():
        pytest.skip("s3fs and moto are needed for a local S3 server")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench"))
from make_trace import replicate  # noqa: E402


def _same(report: dict) -> dict:
    """A report without its one field that measures the run rather than the trace."""
    return {k: v for k, v in report.items() if k != "analysis_seconds"}


@pytest.fixture(scope="module")
def cluster():
    # One cluster for the module: starting worker processes takes seconds on a small machine.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def logdir(cpu_traces, tmp_path_factory):
    root = tmp_path_factory.mktemp("dask_logdir")
    s = cpu_traces["sdpa"]
    write_job(root / "job", {0: s, 1: s, 2: s, 3: cpu_traces["math"]}, slow={1: 1.5})
    (root / "single").mkdir()
    (root / "single" / "host_1.1.pt.trace.json").write_bytes(cpu_traces["eager"].read_bytes())
    (root / "bad").mkdir()
    (root / "bad" / "host_1.1.pt.trace.json").write_bytes(b'{"hello": "world"}')
    for dirpath, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(dirpath, n), (1_600_000_000, 1_600_000_000))
    return root


def _files(root):
    return sorted(str(p) for p in root.rglob("*.pt.trace.json*"))


def test_cluster_reports_equal_in_process_reports_and_a_bad_trace_fails_alone(client, logdir):
    paths = _files(logdir)
    got = dict(dask_jobs.analyze_many(client, paths))
    assert list(got) == paths
    for p in paths:
        if "/bad/" in p:
            assert isinstance(got[p], TraceError) and "not a trace" in str(got[p]) and str(got[p]).startswith(p)
            with pytest.raises(TraceError) as local:
                analyze_file(p)
            assert str(local.value) == str(got[p])
        else:
            assert _same(got[p]) == _same(analyze_file(p))


def test_cli_dask_output_equals_in_process(cluster, logdir, capsys):
    assert cli.main(["report", str(logdir), "-q", "--json", "--compact"]) == 2  # the bad run
    local = capsys.readouterr()
    assert cli.main(["report", str(logdir), "-q", "--json", "--compact", "--dask", cluster.scheduler_address]) == 2
    remote = capsys.readouterr()
    assert remote.err == local.err and "bad/host_1.1.pt.trace.json: JSON but not a trace" in remote.err
    a, b = json.loads(local.out), json.loads(remote.out)
    assert [_same(r) for r in a["reports"]] == [_same(r) for r in b["reports"]]
    assert a["ranks"] == b["ranks"] and b["ranks"][0]["run"] == "job" and b["ranks"][0]["slowest"]["rank"] in (1, 3)


def test_several_paths_are_analysed_on_one_cluster(cluster, logdir, capsys, monkeypatch):
    # tb-attn report a/ b/ --dask local: one cluster (and one connection) serves every path.
    connected = []
    real = dask_jobs.connect
    monkeypatch.setattr(dask_jobs, "connect", lambda address, **kw: connected.append(address) or real(address, **kw))
    paths = [str(logdir / "single"), str(logdir / "job")]
    assert cli.main(["report", *paths, "-q", "--json", "--compact", "--dask", cluster.scheduler_address]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert connected == [cluster.scheduler_address]
    assert cli.main(["report", *paths, "-q", "--json", "--compact"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert len(remote["reports"]) == 5 and [_same(r) for r in remote["reports"]] == [_same(r) for r in local["reports"]]


def test_a_trace_that_kills_every_worker_is_its_own_error_line(cpu_traces, tmp_path):
    """A trace too big for the workers' memory: the nanny kills each worker that runs it (a real
    kill by Dask's memory monitor), the scheduler gives up (KilledWorker), and that trace gets an
    error line while the small one beside it is analysed."""
    big = tmp_path / "big.pt.trace.json"
    replicate(str(cpu_traces["sdpa"]), 1200, str(big))
    small = tmp_path / "small.pt.trace.json"
    small.write_bytes(cpu_traces["sdpa"].read_bytes())
    # its text alone is more than a worker may hold (the engine's own memory does not decide it)
    assert big.stat().st_size > 300 << 20
    # Two idle single-thread workers take one task each; no retries, so the big one fails at its
    # first kill (a task on a worker when it dies counts a failure, whichever task killed it).
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.worker.memory.terminate": 0.95}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      memory_limit="300MB") as c, distributed.Client(c) as cl:
            got = dict(dask_jobs.analyze_many(cl, [str(big), str(small)]))
    assert isinstance(got[str(big)], TraceError) and "KilledWorker" in str(got[str(big)])
    assert str(got[str(big)]).startswith(f"{big}: the Dask task failed")
    assert isinstance(got[str(small)], dict) and got[str(small)]["calls"] > 0


def test_a_worker_killed_mid_task_is_replaced_and_the_task_rerun(client, cpu_traces, tmp_path):
    big = tmp_path / "big.pt.trace.json"
    replicate(str(cpu_traces["sdpa"]), 120, str(big))  # about a second of analysis: long enough to kill it mid-way
    want = _same(msgspec.to_builtins(analyze_file(str(big))))  # as the JSON the worker sends
    pids = client.run(os.getpid)
    fut = client.submit(dask_jobs.analyze_one, str(big), pure=False)
    deadline = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < deadline:
        running = {w: ts for w, ts in client.processing().items() if fut.key in ts}
        victim = next(iter(running), None)
        time.sleep(0.02)
    assert victim is not None, "the task never started"
    time.sleep(0.2)
    assert not fut.done()
    os.kill(pids[victim], signal.SIGKILL)
    status, body = fut.result(timeout=120)
    assert status == "ready"
    assert _same(msgspec.json.decode(body)) == want
    # The scheduler saw the task's worker die while running it (so the result is the rerun's).
    key = fut.key
    assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.tasks[key].suspicious) == 1
    # The nanny started a new worker process in place of the killed one.
    client.wait_for_workers(2, timeout=60)
    assert pids[victim] not in client.run(os.getpid).values()


def test_plugin_analyses_on_the_cluster_named_by_the_environment(tb_app, cluster, logdir, tmp_path):
    http, plugins = tb_app(logdir, env={"TB_ATTN_DASK_SCHEDULER": cluster.scheduler_address})
    from tb_attn_plugin.plugin.dask_pool import DaskAnalysisPool

    assert isinstance(plugins["tb_attn"].index.pool, DaskAnalysisPool)
    doc = wait_runs(http, all_settled)
    status = {r["run"]: r["status"] for r in doc["runs"]}
    assert status == {"bad": "error", "job": "ready", "single": "ready"}
    bad = doc["runs"][0]["workers"][0]["spans"][0]["message"]
    assert bad.startswith("bad/host_1.1.pt.trace.json: JSON but not a trace")
    one = json.loads(http.get("/data/plugin/tb_attn/report?run=single").data)
    want = analyze_file(str(logdir / "single" / "host_1.1.pt.trace.json"))
    want["source"]["path"] = "single/host_1.1.pt.trace.json"  # the plugin names files relative to the logdir
    assert _same(one) == _same(msgspec.to_builtins(want))
    ranks = json.loads(http.get("/data/plugin/tb_attn/ranks?run=job").data)
    assert ranks["rank_count"] == 4 and ranks["world_size"] == 4 and ranks["errors"] == []
    assert [o["rank"] for o in ranks["odd_ranks"] if o["what"] == "implementation"] == [3]  # the math rank


def test_without_dask_the_message_says_what_to_install(monkeypatch, logdir, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    assert cli.main(["report", str(logdir), "-q", "--dask", "local"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tb-attn: error: --dask needs Dask's distributed scheduler, which is not installed: " \
                  "pip install 'tb-attn[dask]'"


def test_a_url_logdir_is_listed_for_the_workers(cpu_traces):
    """tb-attn report s3://bucket/logdir --dask: the client lists the store, each worker reads its URL."""
    fsspec = pytest.importorskip("fsspec")
    from tb_attn_plugin.trace.url_logdir import url_logdir as _url_logdir

    data = cpu_traces["sdpa"].read_bytes()
    for name in ("job/host_rank0.2.pt.trace.json", "job/host_rank1.2.pt.trace.json", "job/notes.json",
                 "job/.tmp/host_rank2.2.pt.trace.json"):
        with fsspec.open(f"memory://urllogdir/{name}", "wb") as fh:
            fh.write(data)
    files = _url_logdir("memory://urllogdir")
    assert [(f.run, f.worker, f.span) for f in files] == [("job", "host_rank0", "2"), ("job", "host_rank1", "2")]
    assert all(f.path.startswith("memory://") for f in files)
    with pytest.raises(TraceError, match="no trace files"):
        _url_logdir("memory://empty-logdir-nothing-here")


def test_ctrl_c_keeps_what_is_done(client, logdir):
    paths = [p for p in _files(logdir) if "/bad/" not in p]

    def interrupt(done, total):
        if done == 1:
            raise KeyboardInterrupt

    got = list(dask_jobs.analyze_many(client, paths, interrupt))
    assert [p for p, _ in got] == paths
    finished = [r for _, r in got if isinstance(r, dict)]
    assert len(finished) >= 1
    left = [r for _, r in got if isinstance(r, TraceError)]
    assert len(finished) + len(left) == len(paths)
    assert all("interrupted (Ctrl-C)" in str(e) for e in left) and left


def _custom_kernel_trace(root):
    """The graph-replay trace whose attention only a user's [[family]] row explains (the plugin test's)."""
    from tests.test_plugin_kernels import logdir_with_custom_kernel

    return next((logdir_with_custom_kernel(root) / "custom").iterdir())


def test_cli_dask_workers_get_the_patterns_rows(cluster, tmp_path, capsys):
    """--patterns FILE with --dask: the rows go with every task (the file need not exist on a worker),
    and a later job without them is not analysed with the earlier job's rows."""
    from tb_attn_plugin.attention import patterns as P
    from tests.test_plugin_kernels import TABLE

    trace = _custom_kernel_trace(tmp_path)
    table = tmp_path / "mine.toml"
    table.write_text(TABLE)
    try:
        assert cli.main(["report", str(trace), "-q", "--json", "--dask", cluster.scheduler_address,
                         "--patterns", str(table)]) == 0
        (with_rows,) = json.loads(capsys.readouterr().out)["reports"]
        P.set_user_families(())
        local = analyze_file(str(trace))
        assert cli.main(["report", str(trace), "-q", "--json", "--dask", cluster.scheduler_address]) == 0
        (without,) = json.loads(capsys.readouterr().out)["reports"]
    finally:
        P.set_user_families(())
    assert with_rows["calls"] == 3 and with_rows["unknown_kernels"] == []
    assert with_rows["kernel_table"]["user_families"] == 1 and with_rows["kernel_table"]["user_sources"] == ["mine.toml"]
    assert without["calls"] == 0 and without["kernel_table"]["user_families"] == 0
    assert _same(without) == _same(local)


def test_plugin_on_dask_applies_its_patterns_and_annotates_locally(tb_app, cluster, tmp_path):
    """TB_ATTN_PATTERNS reaches the cluster's workers (which started without it) and the cache key;
    /annotated is written by a local process, since the download is served from this machine."""
    import gzip

    from tests.test_plugin_kernels import TABLE

    logdir = tmp_path / "logdir"
    _custom_kernel_trace(logdir)
    table = tmp_path / "mine.toml"
    table.write_text(TABLE)
    http, plugins = tb_app(logdir, env={"TB_ATTN_DASK_SCHEDULER": cluster.scheduler_address,
                                        "TB_ATTN_PATTERNS": str(table)})
    wait_runs(http, lambda d: all_settled(d, ["custom"]))
    r = json.loads(http.get("/data/plugin/tb_attn/report?run=custom").data)
    assert r["calls"] == 3 and r["kernel_table"]["user_families"] == 1, r.get("error")
    resp = http.get("/data/plugin/tb_attn/annotated?run=custom")
    assert resp.status_code == 200, resp.data[:300]
    doc = json.loads(gzip.decompress(resp.data))
    assert sum(1 for e in doc["traceEvents"] if e.get("cat") == "tb_attn.call") == 3
    # The same cache directory without the table: not the report made with it.
    plugins["tb_attn"].close()
    http, _ = tb_app(logdir, env={"TB_ATTN_DASK_SCHEDULER": cluster.scheduler_address})
    wait_runs(http, lambda d: all_settled(d, ["custom"]))
    r = json.loads(http.get("/data/plugin/tb_attn/report?run=custom").data)
    assert r["calls"] == 0 and r["unknown_kernels"], r.get("error")


@pytest.mark.parametrize("address,cause", [("foo", "not a Dask scheduler address: 'foo'"),
                                           ("tcp://[::", "not a Dask scheduler address: 'tcp://[::'"),
                                           ("", "--dask needs a scheduler address")])
def test_a_bad_dask_address_is_one_line(logdir, capsys, monkeypatch, address, cause):
    """Refused before any Client starts Dask's event loop: on a loaded machine that start can outlast
    Dask's own 10 s and the typo came out as Dask's AssertionError."""
    import distributed

    clients = []
    monkeypatch.setattr(distributed, "Client", lambda *a, **kw: clients.append(a) or pytest.fail("Client made"))
    assert cli.main(["report", str(logdir / "single"), "-q", "--dask", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tb-attn: error: {cause}") and err.count("\n") == 1 and "Traceback" not in err
    assert clients == []


def test_plugin_with_an_unreachable_scheduler_fails_each_trace_fast_with_the_cause(tb_app, logdir, monkeypatch):
    """One connection attempt, then every file's error line says why at once: the index submits under
    its lock, so a 20 s timeout per file would hang TensorBoard for hours on a job of 1,024 ranks."""
    monkeypatch.setattr(dask_jobs, "CONNECT_TIMEOUT", "2s")
    attempts = []
    real = dask_jobs.connect
    monkeypatch.setattr(dask_jobs, "connect", lambda address, **kw: attempts.append(address) or real(address, **kw))
    http, _ = tb_app(logdir, env={"TB_ATTN_DASK_SCHEDULER": "tcp://127.0.0.1:1"})
    doc = wait_runs(http, all_settled)
    spans = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    assert len(spans) == 6 and all(s["status"] == "error" for s in spans)
    assert all("TB_ATTN_DASK_SCHEDULER=tcp://127.0.0.1:1: cannot reach the Dask scheduler" in s["message"]
               for s in spans)
    assert attempts == ["tcp://127.0.0.1:1"]
    resp = http.get("/data/plugin/tb_attn/ranks?run=job")
    # every rank failed: an answer that says so (200 with not_a_job, as for any listed run that is no
    # job: the tab lists it, so it is no missing resource), never a 500
    body = json.loads(resp.data)
    err = body["not_a_job"]
    assert resp.status_code == 200 and "4 of its 4 traces failed, first: job/" in err and "cannot reach" in err
    assert len(body["errors"]) == 4


def test_tensorboard_answers_while_the_scheduler_is_being_reached(tb_app, logdir, monkeypatch):
    """Connecting runs on a thread of its own: /runs answers while the connection hangs (the index
    submits under its lock), and the files waiting on it fail with the cause once it gives up."""
    import threading

    release, entered = threading.Event(), threading.Event()

    def hanging(address, **kw):
        entered.set()
        release.wait(60)
        raise dask_jobs.DaskUnavailable(f"cannot reach the Dask scheduler at {address}: refused")

    monkeypatch.setattr(dask_jobs, "connect", hanging)
    http, _ = tb_app(logdir, env={"TB_ATTN_DASK_SCHEDULER": "tcp://127.0.0.1:1"})
    assert entered.wait(60), "no connection was attempted"
    answered = []
    t = threading.Thread(target=lambda: answered.append(http.get("/data/plugin/tb_attn/runs").status_code))
    t.start()
    t.join(30)
    hung = t.is_alive()
    release.set()
    t.join()
    assert not hung and answered == [200], "/runs waited for the Dask connection"
    doc = wait_runs(http, all_settled)
    spans = [s for r in doc["runs"] for w in r["workers"] for s in w["spans"]]
    assert spans and all("cannot reach the Dask scheduler at tcp://127.0.0.1:1" in s["message"] for s in spans)


def test_an_s3_logdir_read_by_the_workers_themselves_equals_in_process(s3, cpu_traces, tmp_path, capsys):
    """tb-attn report s3://logs/job --dask: the client lists the bucket, each worker process opens its
    rank's s3:// URL itself (a local S3 server, moto); the reports and rank summary are the in-process ones."""
    pytest.importorskip("moto.server")
    for path in write_job(tmp_path / "job", {0: cpu_traces["sdpa"], 1: cpu_traces["sdpa"], 2: cpu_traces["math"]},
                          slow={1: 1.4}).values():
        s3.pipe(f"logs/job/{path.name}", path.read_bytes())
    s3.pipe("logs/job/host_rank9.1.pt.trace.json.gz", b"not gzip")  # a bad object fails alone
    assert cli.main(["report", "s3://logs", "-q", "--json", "--compact"]) == 2
    local = capsys.readouterr()
    # Worker processes started now inherit the S3 endpoint of the test's environment.
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        with distributed.Client(c) as client:
            opened = client.run(lambda: os.environ.get("AWS_ENDPOINT_URL"))
        assert cli.main(["report", "s3://logs", "-q", "--json", "--compact", "--dask", c.scheduler_address]) == 2
    remote = capsys.readouterr()
    assert len(opened) == 2 and set(opened.values()) == {os.environ["AWS_ENDPOINT_URL"]}
    assert remote.err == local.err and remote.err.count("\n") == 1
    assert remote.err.startswith("tb-attn: error: s3://logs/job/host_rank9.1.pt.trace.json.gz: ")
    a, b = json.loads(local.out), json.loads(remote.out)
    assert len(b["reports"]) == 3 and [r["source"]["path"] for r in b["reports"]][0].startswith("s3://logs/job/")
    assert [_same(r) for r in a["reports"]] == [_same(r) for r in b["reports"]]
    assert a["ranks"] == b["ranks"] and b["ranks"][0]["rank_count"] == 3 and b["ranks"][0]["slowest"]["rank"] in (1, 2)


def test_dask_progress_in_a_log_is_whole_lines(cluster, logdir, capsys):
    # capsys's stderr is no terminal, as when stderr is redirected to a file: no "\r" redraws there.
    assert cli.main(["report", str(logdir / "job"), "--json", "--compact", "--dask", cluster.scheduler_address]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and err.rstrip().splitlines()[-1].endswith(" traces analysed on Dask"), err
