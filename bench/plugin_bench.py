"""The plugin under load: a real ``tensorboard`` process over many runs and one large trace.

Measures what a user waits for and what TensorBoard pays:
  * time to the first ready report (any run), and to the large run's report when a user asks for it,
    counted from the moment the runs appear in a running TensorBoard's logdir;
  * warm response time of /report (large and small run), /runs and /compare, over HTTP;
  * the TensorBoard process's resident memory growth per loaded run, and per run whose report was
    also opened (analysis happens in worker processes, which are not counted: they are the point);
  * a restart over the same logdir: time until every run is ready again, from the disk cache.

    .venv/bin/python bench/plugin_bench.py                     # 200 runs + a 76 MB trace
    .venv/bin/python bench/plugin_bench.py --runs 50 --copies 8 # quick
Writes bench/out/plugin/results.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(REPO, "..", "shared", "traces")
SMALL = ["tl_h100_bert_small_sdpa_flash", "tl_mi300x_bert_small_sdpa_aotriton", "tl_mi300x_torch_compile_small",
         "hta_a100_negative_log_softmax_fwdbwd", "tl_h100_owlv2_eager_bmm_softmax"]
OLD = 1_600_000_000
P = "/data/plugin/tb_attn"


def prepare(out: str, runs: int, copies: int) -> tuple[str, str]:
    """A staging directory of runs (moved into the live logdir later) and the large trace."""
    sys.path.insert(0, HERE)
    from make_trace import replicate

    staging = os.path.join(out, "staging")
    shutil.rmtree(staging, ignore_errors=True)
    big = os.path.join(out, f"bert_x{copies}.json")
    if not os.path.exists(big):
        replicate(os.path.join(SHARED, "tl_h100_bert_small_sdpa_flash.json.gz"), copies, big)
    for i in range(runs):
        d = os.path.join(staging, f"run{i:04d}")
        os.makedirs(d)
        dst = os.path.join(d, "host_1.1700000000000000001.pt.trace.json.gz")
        shutil.copy(os.path.join(SHARED, SMALL[i % len(SMALL)] + ".json.gz"), dst)
        os.utime(dst, (OLD, OLD))
    d = os.path.join(staging, "large")
    os.makedirs(d)
    os.link(big, os.path.join(d, "host_1.1700000000000000001.pt.trace.json"))
    os.utime(big, (OLD, OLD))
    return staging, big


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# TensorBoard with every installed plugin except torch-tb-profiler, which parses every trace of the
# logdir in processes of its own and would compete with the plugin under test for the same cores.
LAUNCH = """
import sys
from tensorboard import default, program
tb = program.TensorBoard(plugins=[p for p in default.get_plugins() if getattr(p, "__name__", "") != "TorchProfilerPlugin"])
tb.configure(argv=[""] + sys.argv[1:])
sys.exit(tb.main())
"""


def start_tb(logdir: str, cache: str, workers: int, with_profiler_tab: bool = False):
    port = free_port()
    env = dict(os.environ, TB_ATTN_CACHE_DIR=cache, TB_ATTN_WORKERS=str(workers))
    log = open(os.path.join(os.path.dirname(cache), "tensorboard.log"), "ab")
    launcher = ["-m", "tensorboard.main"] if with_profiler_tab else ["-c", LAUNCH]
    proc = subprocess.Popen([sys.executable, *launcher, "--logdir", logdir, "--host", "127.0.0.1",
                             "--port", str(port), "--load_fast", "false", "--reload_interval", "1"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    while get(f"{base}/data/plugins_listing")[0] != 200:
        if proc.poll() is not None:
            raise SystemExit("tensorboard exited; see tensorboard.log")
        time.sleep(0.1)
    return proc, base


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def runs_doc(base: str) -> dict:
    return json.loads(get(f"{base}{P}/runs")[1])


def spans(doc):
    return [(r["run"], s) for r in doc["runs"] for w in r["workers"] for s in w["spans"]]


def timed(url: str, n: int) -> dict:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        code, body = get(url)
        times.append((time.perf_counter() - t) * 1000)
        assert code == 200, (url, code, body[:200])
    times.sort()
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * (n - 1))], 2),
            "bytes": len(body)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--copies", type=int, default=128, help="size of the large trace, in copies of BERT-small")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "plugin"))
    ap.add_argument("--with-profiler-tab", action="store_true", help="also load torch-tb-profiler, if installed")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    staging, big = prepare(a.out, a.runs, a.copies)
    logdir, cache = os.path.join(a.out, "logdir"), os.path.join(a.out, "cache")
    for d in (logdir, cache):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(logdir)
    n = a.runs + 1
    res: dict = {"runs": n, "large_trace_mb": round(os.path.getsize(big) / 2**20, 1), "workers": a.workers}

    proc, base = start_tb(logdir, cache, a.workers, a.with_profiler_tab)
    try:
        while not runs_doc(base).get("scanned"):
            time.sleep(0.1)
        for _ in range(5):
            get(f"{base}{P}/runs"), get(f"{base}/data/plugins_listing")
        rss0 = rss_mb(proc.pid)

        # The runs appear at once, as when a user points TensorBoard at an existing logdir.
        t0 = time.perf_counter()
        for name in os.listdir(staging):
            os.rename(os.path.join(staging, name), os.path.join(logdir, name))
        first = large = None
        while True:
            if large is None:
                code, _ = get(f"{base}{P}/report?run=large")  # the user opens the large run
                if code == 200:
                    large = time.perf_counter() - t0
            doc = runs_doc(base)
            states = [s["status"] for _, s in spans(doc)]
            if first is None and "ready" in states:
                first = time.perf_counter() - t0
            if len(states) == n and "loading" not in states and large is not None:
                break
            time.sleep(0.05)
        res["first_ready_report_s"] = round(first, 2)
        res["large_report_ready_s"] = round(large, 2)
        res["all_ready_s"] = round(time.perf_counter() - t0, 2)
        res["errors"] = states.count("error")

        rss1 = rss_mb(proc.pid)
        res["rss_before_mb"], res["rss_all_loaded_mb"] = round(rss0, 1), round(rss1, 1)
        res["rss_growth_per_loaded_run_mb"] = round((rss1 - rss0) / n, 3)

        res["warm_report_large"] = timed(f"{base}{P}/report?run=large", 30)
        res["warm_report_small"] = timed(f"{base}{P}/report?run=run0004", 30)  # owlv2: the largest small report
        res["warm_runs"] = timed(f"{base}{P}/runs", 30)
        res["warm_compare"] = timed(f"{base}{P}/compare?run=run0000&run=run0001", 20)
        res["warm_kernels"] = timed(f"{base}{P}/kernels?run=run0004&stage=softmax", 20)

        for run, _ in spans(doc):  # open every report once
            get(f"{base}{P}/report?run={run}")
        rss2 = rss_mb(proc.pid)
        res["rss_all_opened_mb"] = round(rss2, 1)
        res["rss_growth_per_opened_run_mb"] = round((rss2 - rss0) / n, 3)
    finally:
        stop(proc)

    # Restart over the same logdir: every report comes from the disk cache.
    t0 = time.perf_counter()
    proc, base = start_tb(logdir, cache, a.workers, a.with_profiler_tab)
    try:
        while True:
            states = [s["status"] for _, s in spans(runs_doc(base))]
            if len(states) == n and "loading" not in states:
                break
            time.sleep(0.05)
        res["restart_all_ready_s"] = round(time.perf_counter() - t0, 2)
        res["restart_rss_mb"] = round(rss_mb(proc.pid), 1)
    finally:
        stop(proc)

    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    for k, v in res.items():
        print(f"{k:32s} {v}")


if __name__ == "__main__":
    main()
