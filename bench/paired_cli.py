"""Two checkouts' `tb-attn report --json` on the same trace, as whole processes taking turns.

The engine's speed goals compare this checkout with an earlier one (a git worktree, its C parts
built in place) on a shared, noisy machine: so each pair runs A then B back to back (A B A B ...,
after one warm-up each), and what is quoted is the median of the per-pair ratios, with the medians
of each arm. Per run: CPU seconds (user + system over all threads, from the kernel's accounting of
the finished child), wall seconds, and peak RSS (the child's maxrss, imports included).

    python bench/paired_cli.py --a . --b /path/to/worktree-at-1d20238 /tmp/owlv2x4.json -n 10

Each arm runs `python -m tb_attn_plugin.cli report --json -q FILE > a temporary file` with PYTHONPATH
set to its checkout and the rest of the environment as given (set PYTHONUNBUFFERED=1 to time the
case of a caller that does: an older engine wrote its JSON in ~400,000 small writes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(checkout: str, trace: str, python: str, cache: str) -> dict:
    # Each arm's compiled bytecode in a cache of its own (``cache``), written by the warm-up run: with
    # PYTHONDONTWRITEBYTECODE set, or a checkout whose __pycache__ is older than its sources, an arm
    # would otherwise compile its modules again in every run (67-74 ms here), which is no engine's cost.
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONPYCACHEPREFIX": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile() as out:  # the report lands in a file, as `report --json > r.json` puts it
        t0 = time.perf_counter()
        proc = subprocess.Popen([python, "-m", "tb_attn_plugin.cli", "report", "--json", "-q", os.path.abspath(trace)],
                                stdout=out, stderr=subprocess.PIPE, env=env, cwd="/")
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{checkout}: exit {os.waitstatus_to_exitcode(status)}: {err[-300:]}")
    return {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rss_mib": ru.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="checkout A (the new engine)")
    ap.add_argument("--b", required=True, help="checkout B (the engine compared with)")
    ap.add_argument("-n", type=int, default=10, help="pairs counted (after one warm-up pair)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as ca, tempfile.TemporaryDirectory() as cb:
        for trace in args.traces:
            _compare(args, trace, ca, cb)


def _compare(args, trace: str, ca: str, cb: str) -> None:
    """One trace: a warm-up pair, then args.n pairs A B, and the medians."""
    run(args.a, trace, args.python, ca), run(args.b, trace, args.python, cb)  # warm-up: page cache, .pyc
    pairs = []
    for _ in range(args.n):
        pairs.append((run(args.a, trace, args.python, ca), run(args.b, trace, args.python, cb)))
    print(f"\n{trace}: {args.n} pairs, load average now {os.getloadavg()[0]:.2f}")
    print(f"{'':10} {'A median':>9} {'B median':>9} {'A/B median':>11} {'A/B min-max':>14}")
    for key in ("cpu", "wall", "rss_mib"):
        a = [p[0][key] for p in pairs]
        b = [p[1][key] for p in pairs]
        r = [x / y for x, y in zip(a, b)]
        print(f"{key:10} {statistics.median(a):9.3f} {statistics.median(b):9.3f} {statistics.median(r):11.3f}"
              f" {min(r):6.3f}-{max(r):6.3f}")


if __name__ == "__main__":
    main()
