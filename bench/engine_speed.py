"""Engine speed and memory against orjson.loads, side by side, each in a fresh process.

Builds large traces by replicating a real one (bench/make_trace.py), then for each size runs
``orjson.loads`` of the file and tb-attn's full analysis (read, decode, link, detect, measure,
report), REPEAT times each in a new interpreter, and prints the best wall time and the peak RSS
growth over an interpreter that has only imported the code.

    .venv/bin/python bench/engine_speed.py                 # BERT-small H100 trace x8, x128, ~130 MB
    .venv/bin/python bench/engine_speed.py --copies 8 128 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_SRC = os.path.join(REPO, "..", "shared", "traces", "tl_h100_bert_small_sdpa_flash.json.gz")

CHILD = r"""
import gc, json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
import orjson
from tb_attn_plugin.report.build import analyze_file
gc.collect()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if mode == "orjson":
    with open(path, "rb") as fh:
        doc = orjson.loads(fh.read())
    n = len(doc["traceEvents"])
else:
    r = analyze_file(path)
    n = r["trace"]["events"]
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": dt, "peak_growth_mb": (peak - base) / 1024, "events": n}))
"""


def run(mode: str, path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, path], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best(mode: str, path: str, repeat: int) -> dict:
    runs = [run(mode, path) for _ in range(repeat)]
    return {"seconds": min(r["seconds"] for r in runs), "peak_growth_mb": min(r["peak_growth_mb"] for r in runs),
            "events": runs[0]["events"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--copies", type=int, nargs="+", default=[8, 128, 236])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    from make_trace import replicate

    os.makedirs(args.out, exist_ok=True)
    rows = []
    for n in args.copies:
        path = os.path.join(args.out, f"replicated_x{n}.json")
        if not os.path.exists(path):
            replicate(args.src, n, path)
        size_mb = os.path.getsize(path) / 1e6
        o = best("orjson", path, args.repeat)
        a = best("tb-attn", path, args.repeat)
        rows.append((n, size_mb, a["events"], o, a))
    print(f"source: {os.path.basename(args.src)}; best of {args.repeat} fresh processes each\n")
    print(f"{'copies':>6} {'MB':>7} {'events':>9} | {'orjson s':>8} {'tb-attn s':>9} {'ratio':>6} | "
          f"{'orjson MB':>9} {'tb-attn MB':>10} {'tb-attn/file':>12}")
    for n, mb, ev, o, a in rows:
        print(f"{n:>6} {mb:>7.1f} {ev:>9} | {o['seconds']:>8.3f} {a['seconds']:>9.3f} {a['seconds'] / o['seconds']:>6.2f} | "
              f"{o['peak_growth_mb']:>9.0f} {a['peak_growth_mb']:>10.0f} {a['peak_growth_mb'] / mb:>12.2f}")
    if len(rows) >= 2:
        (n0, _, e0, _, a0), (n1, _, e1, _, a1) = rows[0], rows[1]
        print(f"\nscaling x{n0} -> x{n1}: {e1 / e0:.1f}x the events took {a1['seconds'] / a0['seconds']:.1f}x the time")


if __name__ == "__main__":
    main()
