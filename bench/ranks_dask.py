"""A job of many ranks (1,024 by default), analysed in-process vs on a Dask LocalCluster.

The ranks are made from one real trace (BERT-small on H100 by default): rank r is a copy whose
time stamps and durations are stretched by a factor drawn from a seeded generator (0.9-1.1, with
rank N-3 at 1.6x), carrying kineto's distributedInfo {rank, world_size}; written as
tensorboard_trace_handler names them ({worker}.{time}.pt.trace.json.gz) into LOGDIR/job/.

Both arms run `tb-attn report LOGDIR --json` as the CLI does (report.build.analyze_path, or
cluster.dask_jobs with one single-threaded worker process per core), each in a fresh process
(bench/_measure.py). Memory: the client process's peak RSS (VmHWM), and each Dask worker's own
VmHWM read on the worker before the cluster is closed. The two arms' reports (less
analysis_seconds) and rank summaries are compared and must be identical.

    .venv/bin/python bench/ranks_dask.py --ranks 1024        # ~5 min on 2 cores
    .venv/bin/python bench/ranks_dask.py --ranks 64          # quick
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _measure import child_code, run_once  # noqa: E402

sys.path.insert(0, REPO)
from tests.rank_jobs import stretched  # noqa: E402  (the test suite's rank jobs stretch traces the same way)

DEFAULT_SOURCE = os.path.join(REPO, "..", "shared", "traces", "tl_h100_bert_small_sdpa_flash.json.gz")


def make_job(source: str, ranks: int, out: str, seed: int = 0) -> dict[int, float]:
    import orjson

    raw = open(source, "rb").read()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    rng = random.Random(seed)
    factors = {r: round(rng.uniform(0.9, 1.1), 4) for r in range(ranks)}
    factors[ranks - 3] = 1.6
    job = os.path.join(out, "job")
    os.makedirs(job, exist_ok=True)
    for r, f in factors.items():
        d = {**stretched(doc, f),
             "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks, "pg_count": 1}}
        name = f"node{r // 8}_{1000 + r % 8}.{1700000000000 + r}.pt.trace.json.gz"
        with open(os.path.join(job, name), "wb") as fh:
            fh.write(gzip.compress(orjson.dumps(d), 1))
    return factors


_SETUP = f"""
import os, sys, io, contextlib, json
sys.path.insert(0, {REPO!r})
import msgspec
from tb_attn_plugin.report.build import analyze_path
from tb_attn_plugin.ranks.runs import rank_summaries
"""

IN_PROCESS = """
items = list(analyze_path(PATH))
ranks = rank_summaries(items)
reports = [r for _, r in items if isinstance(r, dict)]
for r in reports:
    r.pop("analysis_seconds", None)
open(ARGS[0], "wb").write(msgspec.json.encode({"reports": reports, "ranks": ranks}))
n = len(reports)
"""

ON_DASK = """
from tb_attn_plugin.cluster import dask_jobs
from tb_attn_plugin.trace import discover

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

client = dask_jobs.connect("local")
workers = len(client.nthreads())
try:
    files = discover.find_traces(PATH, loose=True)
    got = dict(dask_jobs.analyze_many(client, [tf.path for tf in files]))
    items = [(tf, got[tf.path]) for tf in files]
    worker_mb = client.run(hwm)
finally:
    dask_jobs.close(client)
ranks = rank_summaries(items)
reports = [r for _, r in items if isinstance(r, dict)]
for r in reports:
    r.pop("analysis_seconds", None)
open(ARGS[0], "wb").write(msgspec.json.encode({"reports": reports, "ranks": ranks}))
n = len(reports)
extra = {"workers": workers, "worker_peak_mb": sorted(worker_mb.values())}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--source", default=DEFAULT_SOURCE)
    ap.add_argument("--out", default="/tmp/tb-attn-ranks-bench")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    t = time.time()
    make_job(args.source, args.ranks, args.out)
    job_mb = sum(os.path.getsize(os.path.join(args.out, "job", f)) for f in os.listdir(os.path.join(args.out, "job"))) / 2**20
    print(f"wrote {args.ranks} rank traces ({job_mb:.0f} MiB gzip) in {time.time() - t:.0f} s", flush=True)
    py = sys.executable
    res = {}
    try:
        for name, code in (("in-process", IN_PROCESS), ("dask local", ON_DASK)):
            out = os.path.join(args.out, f"{name.replace(' ', '_')}.json")
            r = run_once(py, child_code(_SETUP, code), args.out, out, timeout=7200)
            res[name] = r
            print(name, json.dumps(r), flush=True)
        same = open(os.path.join(args.out, "in-process.json"), "rb").read() == \
            open(os.path.join(args.out, "dask_local.json"), "rb").read()
        print(f"identical reports and rank summaries: {same}")
        doc = json.load(open(os.path.join(args.out, "dask_local.json")))
        if doc["ranks"]:
            print(f"rank summary: {doc['ranks'][0][1]['headline']}")
    finally:
        if not args.keep:
            shutil.rmtree(args.out, ignore_errors=True)
    a, b = res["in-process"], res["dask local"]
    print()
    print("| arm | ranks | wall s | client peak RSS | workers | peak RSS per worker |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| in-process | {a.get('n')} | {a.get('seconds', float('nan')):.1f} | {a.get('peak_rss_mb', 0):.0f} MB | - | - |")
    wk = (b.get("extra") or {}).get("worker_peak_mb") or []
    print(f"| `--dask local` | {b.get('n')} | {b.get('seconds', float('nan')):.1f} | {b.get('peak_rss_mb', 0):.0f} MB "
          f"| {(b.get('extra') or {}).get('workers')} | {', '.join(f'{x:.0f}' for x in wk)} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
