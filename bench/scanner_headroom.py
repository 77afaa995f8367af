"""What a faster C scanner would buy a whole report: `tb-attn report` with the scanner's CPU scaled down.

The scanner's calls are first recorded once (their results and the thread CPU each took). Each timed
run is then a fresh process running `tb-attn report --json` on the same trace, in which every call
into _scanner.scan_events returns its recorded result after burning a given fraction of its
recorded CPU time with the GIL released (sha256 over a buffer, calibrated in that process): fraction
1.0 stands for today's scanner, 0.5 for one twice as fast, 0.0 for a free one. The file is still read
(by the reading thread, as always), and everything after the scanner runs for real, so the gap
between the fractions is what the scanner's speed alone is worth on this machine, contention for
its cores included.

Burning CPU is not scanning (no memory traffic of its own), and the recorded results are loaded
before each run's clock starts, so the absolute times are a little lower than a real report's; the
fractions are timed alike, in turns (1.0, 0.5, ..., 1.0, 0.5, ...), and compared with each other.

    python bench/scanner_headroom.py /tmp/owlv2x4.json -n 5
    python bench/scanner_headroom.py /tmp/owlv2x4.json --fractions 1,0.75,0.5,0.25,0
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import sys, time, os, pickle, hashlib
repo, trace, mode, store, frac = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
sys.path.insert(0, repo)
from tb_attn_plugin.trace import native, stream
scan = native._scan_events
if mode == "record":
    got = []
    def recorded(*a):
        c = time.thread_time()
        r = scan(*a)
        got.append((r, time.thread_time() - c))
        return r
    native._scan_events = recorded
else:
    results = iter(pickle.load(open(store, "rb")))
    block = b"x" * (1 << 20)
    c = time.thread_time()
    for _ in range(30):
        hashlib.sha256(block)  # releases the GIL over a buffer this large
    per_byte = (time.thread_time() - c) / (30 << 20)
    def replayed(*a):
        r, cpu = next(results)
        left = int(cpu * frac / per_byte)
        while left > 0:
            hashlib.sha256(memoryview(block)[:min(left, 1 << 20)])
            left -= 1 << 20
        return r
    native._scan_events = replayed
t0 = time.perf_counter()
from tb_attn_plugin import cli
sys.stdout = open(os.devnull, "w")
try:
    cli.main(["report", "--json", "-q", trace])
except SystemExit:
    pass
seconds = time.perf_counter() - t0
sys.stdout = sys.__stdout__
if mode == "record":
    pickle.dump(got, open(store, "wb"))
    print(sum(c for _, c in got))
else:
    print(seconds)
"""


def _child(python: str, trace: str, mode: str, store: str, frac: float) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    out = subprocess.run([python, "-c", _CHILD, REPO, os.path.abspath(trace), mode, store, str(frac)],
                         capture_output=True, text=True, env=env, cwd="/", check=False)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit(f"{mode}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("-n", type=int, default=5, help="runs of each fraction, in turns")
    ap.add_argument("--fractions", default="1,0.5,0", help="the scanner's CPU kept, comma-separated")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "scans.pickle")  # written and read by this script's own children only
        cpu = _child(args.python, args.trace, "record", store, 1.0)
        _child(args.python, args.trace, "replay", store, 1.0)  # warm-up
        got: dict[float, list[float]] = {f: [] for f in fractions}
        for _ in range(args.n):
            for f in fractions:
                got[f].append(_child(args.python, args.trace, "replay", store, f))
    base = statistics.median(got[fractions[0]])
    print(f"{args.trace}: the scanner's calls took {cpu * 1e3:.0f} ms of thread CPU; tb-attn report's wall time "
          f"with that CPU scaled, median of {args.n} runs each")
    for f in fractions:
        m = statistics.median(got[f])
        print(f"  scanner CPU x{f:<5} {m * 1e3:7.0f} ms  ({m / base:.3f} of x{fractions[0]})  "
              f"runs {', '.join(f'{x * 1e3:.0f}' for x in sorted(got[f]))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
