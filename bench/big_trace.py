"""One big trace, analysed in bounded memory: peak RSS and wall time of tb-attn on a multi-GB trace
(plain and .gz), next to the floor of reading the file once and scanning its bytes.

The trace is a real one replicated as N profiler steps (bench/make_trace.py) up to the size asked
for. Every measurement runs in a fresh process (bench/_measure.py), in the environment tb-attn's
command line gives itself (CHILD_ENV): peak RSS is that process's VmHWM, the whole process
included; CPU seconds are user + system over all its threads.

  floor (read + count)  read the file in 16 MB blocks (inflating .gz with the engine's library,
                        ISA-L when installed), and count one byte value in each block (memchr speed)
  read + C scan         the same reading, then the engine's C scanner over every window
                        (finds each event, reads cat and name, copies the kept ones): the byte
                        scan the analysis itself makes, without the routing it does besides
                        (sorting kept events into lists, [memory] instants into records)
  read + decode         the engine's reading stage alone (stream.decode_file, as analyze_file calls
                        it): the routed scan, the kept events' columns, names and shapes; no analysis
  tb-attn               report.build.analyze_file, streamed (the whole text is never held)
  tb-attn, whole text   with --whole: the same analysis with streaming off (reads the whole text)

    .venv/bin/python bench/big_trace.py --gb 2            # BERT-small replicated to 2 GB, ~5 min
    .venv/bin/python bench/big_trace.py --gb 2 --repeat 3 # each arm 3 times, interleaved: the best of each
    .venv/bin/python bench/big_trace.py --gb 0.2 --whole  # quick, with the whole-text path too
    .venv/bin/python bench/big_trace.py --gb 2 --repeat 3 --engine /tmp/old  # and an earlier engine, in turn

With --repeat, the arms take turns (floor, scan, tb-attn, floor, ...), so a slow minute of a shared
VM falls on all of them alike; each row keeps its fastest run and lists the others.

The big files are deleted at the end unless --keep.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _measure import child_code, run_once  # noqa: E402
from make_trace import replicate  # noqa: E402

sys.path.insert(0, REPO)
from tb_attn_plugin.cli import COMMAND_ENV  # noqa: E402

# Every arm runs in the process environment tb-attn's command line gives itself (cli.py: COMMAND_ENV,
# and one malloc arena), so tb-attn's rows are what ``tb-attn report`` costs; a variable the user set wins.
CHILD_ENV = {**COMMAND_ENV, "MALLOC_ARENA_MAX": "1", **os.environ}

DEFAULT_SOURCE = os.path.join(REPO, "..", "shared", "traces", "tl_h100_bert_small_sdpa_flash.json.gz")

_SETUP_OF = """
import os, sys
sys.path.insert(0, {repo!r})
from tb_attn_plugin.trace import stream, native, events
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.attention.patterns import needs_shapes
"""
_SETUP = _SETUP_OF.format(repo=REPO)

FLOOR = """
c0 = os.times()
r = stream._Reader(open(PATH, "rb"))
n = 0
for piece in r.pieces():
    n += piece.count(b"\\n")
c1 = os.times()
extra = {"cpu_s": c1.user - c0.user + c1.system - c0.system}
"""

SCAN = """
c0 = os.times()
sc = stream._Scan(stream._Reader(open(PATH, "rb")).pieces())
sc.route = None  # the plain scan (find each event, read cat and name, copy the kept ones), not the routing
n = 0
for kept, dropped in sc.chunks():
    n += dropped
c1 = os.times()
extra = {"cpu_s": c1.user - c0.user + c1.system - c0.system}
"""

DECODE = """
import gc
gc.disable()  # as analyze_file has it while it reads
c0 = os.times()
ev, size = stream.decode_file(PATH, needs_shapes)
c1 = os.times()
n = size
extra = {"cpu_s": c1.user - c0.user + c1.system - c0.system}
"""

ANALYZE = """
if ARGS and ARGS[0] == "whole":
    native.streaming = False
c0 = os.times()
rep = analyze_file(PATH)
c1 = os.times()
n = rep["calls"]
extra = {"cpu_s": c1.user - c0.user + c1.system - c0.system, "events": rep["trace"]["events"],
         "json_bytes": rep["source"]["json_bytes"]}
"""


def build(source: str, gb: float, out_dir: str) -> tuple[str, str, int]:
    os.makedirs(out_dir, exist_ok=True)
    probe = os.path.join(out_dir, "one_copy.json")
    replicate(source, 2, probe)  # one copy as make_trace writes it (compact JSON): the size a copy adds
    one = os.path.getsize(probe) / 2
    os.remove(probe)
    copies = max(1, math.ceil(gb * (1 << 30) / one))
    plain = os.path.join(out_dir, f"big_x{copies}.pt.trace.json")
    t = time.time()
    events = replicate(source, copies, plain)
    print(f"wrote {plain}: {os.path.getsize(plain) / 2**30:.2f} GiB, {events} events, {time.time() - t:.0f} s",
          flush=True)
    gz = plain + ".gz"
    t = time.time()
    try:
        from isal import igzip as gz_mod  # much faster to write; any gzip reader reads it
    except ImportError:
        gz_mod = gzip
    with open(plain, "rb") as src, gz_mod.open(gz, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    print(f"wrote {gz}: {os.path.getsize(gz) / 2**20:.0f} MiB, {time.time() - t:.0f} s", flush=True)
    # Written back before anything is timed: the kernel flushing GBs of dirty pages meanwhile would
    # take CPU from whichever run it overlaps (the first tb-attn run came out ~40% slower).
    os.sync()
    return plain, gz, copies


def _others(arm: dict) -> str:
    """' (7.9, 8.3)': the arm's other runs, with --repeat."""
    others = sorted(arm.get("runs", []))[1:]
    return f" ({', '.join(f'{x:.1f}' for x in others)})" if others else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="the real trace to replicate (default: BERT-small H100)")
    ap.add_argument("--gb", type=float, default=2.0, help="uncompressed size to reach, GiB")
    ap.add_argument("--out", default="/tmp/tb-attn-big-trace", help="where the big files are written")
    ap.add_argument("--whole", action="store_true", help="also measure the whole-text path (needs ~2x the size in RAM)")
    ap.add_argument("--keep", action="store_true", help="keep the big files")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each arm, interleaved; the fastest is kept")
    ap.add_argument("--engine", help="also time the engine of this checkout (e.g. a worktree of an earlier commit)")
    args = ap.parse_args()
    plain, gz, copies = build(args.source, args.gb, args.out)
    python = sys.executable
    results = []
    try:
        for path in (plain, gz):
            size = os.path.getsize(plain)
            row = {"file": os.path.basename(path), "copies": copies, "json_bytes": size, "on_disk": os.path.getsize(path),
                   "cores": os.cpu_count()}
            arms = [("floor", child_code(_SETUP, FLOOR), ()), ("scan", child_code(_SETUP, SCAN), ()),
                    ("decode", child_code(_SETUP, DECODE), ()), ("tb_attn", child_code(_SETUP, ANALYZE), ())]
            if args.whole:
                arms.append(("whole", child_code(_SETUP, ANALYZE), ("whole",)))
            if args.engine:
                # another checkout's engine (a worktree of an earlier commit, built in place), in turn with this one
                arms.append(("engine", child_code(_SETUP_OF.format(repo=os.path.abspath(args.engine)), ANALYZE), ()))
            for turn in range(max(1, args.repeat)):
                for name, code, extra_args in arms:
                    r = run_once(python, code, path, *extra_args, timeout=3600, env=CHILD_ENV)
                    if "error" in r:
                        print(f"{row['file']} {name}: {r['error']}", flush=True)
                        row.setdefault(name, r)
                        continue
                    got = {"seconds": round(r["seconds"], 2), "cpu_s": round(r["extra"]["cpu_s"], 2),
                           "peak_rss_mb": round(r["peak_rss_mb"]), "peak_growth_mb": round(r["peak_growth_mb"])}
                    print(f"{row['file']} {name} (run {turn + 1}): {got}", flush=True)
                    best = row.get(name)
                    runs = (best or {}).get("runs", []) + [got["seconds"]]
                    if best is None or "seconds" not in best or got["seconds"] < best["seconds"]:
                        best = got
                    row[name] = {**best, "runs": runs}
            results.append(row)
    finally:
        if not args.keep:
            for p in (plain, gz):
                if os.path.exists(p):
                    os.remove(p)
    print()
    print("| file | on disk | JSON | floor: read + count | read + C scan | tb-attn | tb-attn / floor "
          "| read + decode | tb-attn / read + C scan | tb-attn CPU s | peak RSS | peak RSS / JSON size |"
          + (" whole text: s, peak RSS |" if args.whole else "") + (" engine of --engine: s, / read + C scan |"
                                                                    if args.engine else ""))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.whole else "")
          + ("---:|" if args.engine else ""))
    for row in results:
        f, s, a = row.get("floor", {}), row.get("scan", {}), row.get("tb_attn", {})
        if "seconds" not in a or "seconds" not in f:
            continue
        scan_s = s.get("seconds", float("nan"))
        line = (f"| {row['file']} | {row['on_disk'] / 2**20:,.0f} MiB | {row['json_bytes'] / 2**30:.2f} GiB "
                f"| {f['seconds']:.1f} s | {scan_s:.1f} s | {a['seconds']:.1f} s{_others(a)} "
                f"| {a['seconds'] / f['seconds']:.1f}x | {row.get('decode', {}).get('seconds', float('nan')):.1f} s "
                f"| **{a['seconds'] / scan_s:.1f}x** | {a['cpu_s']:.1f} "
                f"| {a['peak_rss_mb']:,} MB | **{a['peak_rss_mb'] * 2**20 / row['json_bytes']:.2f}** |")
        if args.whole and "seconds" in row.get("whole", {}):
            w = row["whole"]
            line += f" {w['seconds']:.1f} s, {w['peak_rss_mb']:,} MB |"
        if args.engine and "seconds" in row.get("engine", {}):
            e = row["engine"]
            line += f" {e['seconds']:.1f} s{_others(e)}, {e['seconds'] / scan_s:.1f}x |"
        print(line)
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    with open(os.path.join(HERE, "out", "big_trace.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
