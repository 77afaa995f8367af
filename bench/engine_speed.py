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
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_SRC = os.path.join(REPO, "..", "shared", "traces", "tl_h100_bert_small_sdpa_flash.json.gz")

sys.path.insert(0, HERE)
from _measure import child_code, measure  # noqa: E402  (fresh process, VmHWM peak: see bench/_measure.py)

SETUP = """
import orjson
from tb_attn_plugin.report.build import analyze_file
"""
WORK = {
    "orjson": "with open(PATH, 'rb') as fh:\n    doc = orjson.loads(fh.read())\nn = len(doc['traceEvents'])",
    "tb-attn": "r = analyze_file(PATH)\nn = r['trace']['events']",
}


def best(mode: str, path: str, repeat: int) -> dict:
    r = measure(sys.executable, child_code(SETUP, WORK[mode]), path, repeat=repeat, cwd=REPO)
    if "error" in r:
        raise SystemExit(f"{mode} on {path}: {r['error']}")
    return {"seconds": r["seconds"], "peak_growth_mb": r["peak_growth_mb"], "events": r["n"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--copies", type=int, nargs="+", default=[8, 128, 236])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()
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
