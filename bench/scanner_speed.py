"""The C scanner alone, as the command line runs it on a trace: CPU time of its calls, two checkouts taking turns.

A report's wall time on a big trace is set by the scanning thread until the reading ends (see
bench/README.md), and the whole report's timings on a shared 2-core VM move too much to show a
scanner change of a few percent. This times only the scanner's calls: each run is a fresh process
that begins the reading the way `tb-attn report` does (trace/stream.py's _begin with the patterns'
needs_shapes and learn=True: the same windows, routes and slimming), drains its chunks without
decoding them, and sums the thread CPU time (time.thread_time) spent inside each call into
_scanner.scan_events. Each process does this --repeat times and keeps its best; the checkouts then
take turns (A B A B ...), and the medians of each are quoted with the median of the pair ratios.

    python bench/scanner_speed.py --a . --b /path/to/worktree /tmp/owlv2x4.json -n 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from tb_attn_plugin.trace import native, stream
from tb_attn_plugin.attention.patterns import needs_shapes
spent = [0.0]
scan = native._scan_events
def timed(*a):
    t = time.thread_time()
    try:
        return scan(*a)
    finally:
        spent[0] += time.thread_time() - t
native._scan_events = timed
best = float("inf")
for _ in range(int(sys.argv[3])):
    spent[0] = 0.0
    reading = stream._begin(sys.argv[2], 2, needs_shapes, learn=True)
    if reading is None:
        sys.exit("the scanner is not built, or the file cannot be streamed")
    for _chunk in reading.chunks:
        pass
    reading.close()
    best = min(best, spent[0])
print(best)
"""


def _run(python: str, checkout: str, trace: str, repeat: int) -> float:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([python, "-c", _CHILD, os.path.abspath(checkout), os.path.abspath(trace), str(repeat)],
                         capture_output=True, text=True, env=env, cwd="/", check=False)
    if out.returncode != 0:
        sys.exit(f"{checkout}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    return float(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="checkout A (the new scanner, built in place)")
    ap.add_argument("--b", required=True, help="checkout B (the scanner compared with)")
    ap.add_argument("-n", type=int, default=5, help="pairs of processes")
    ap.add_argument("--repeat", type=int, default=5, help="readings per process, the best kept")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("trace")
    args = ap.parse_args()
    a, b = [], []
    for _ in range(args.n):
        a.append(_run(args.python, args.a, args.trace, args.repeat))
        b.append(_run(args.python, args.b, args.trace, args.repeat))
    ratios = [x / y for x, y in zip(a, b)]
    print(f"{args.trace}: {args.n} pairs, the scanner's calls in ms of thread CPU (best of {args.repeat} per process)")
    print(f"  A median {statistics.median(a) * 1e3:.1f}  B median {statistics.median(b) * 1e3:.1f}  "
          f"A/B median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
