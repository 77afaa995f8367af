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

With --instructions, each arm also runs once under valgrind's callgrind, which counts the
instructions the whole process executes (every thread; imports included). The count hardly moves
from run to run (BERT-small: 560 and 561 M), so it settles a difference that the times of a shared
VM (pair ratios spread over +-20%) cannot; it is not a time: a cache miss or a thread waiting costs
no instruction, and a change can take fewer instructions and more time. About 60x slower than the
run itself (OWLv2 x4: ~90 s per arm).

    python bench/paired_cli.py --a . --b /path/to/worktree -n 0 --instructions /tmp/owlv2x4.json
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _arm(checkout: str, trace: str, python: str, cache: str) -> tuple[list[str], dict]:
    """The command and environment of one run of an arm, timed (run) or counted (instructions)."""
    # Each arm's compiled bytecode in a cache of its own (``cache``), written by the warm-up run: with
    # PYTHONDONTWRITEBYTECODE set, or a checkout whose __pycache__ is older than its sources, an arm
    # would otherwise compile its modules again in every run (67-74 ms here), which is no engine's cost.
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONPYCACHEPREFIX": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return [python, "-m", "tb_attn_plugin.cli", "report", "--json", "-q", os.path.abspath(trace)], env


def run(checkout: str, trace: str, python: str, cache: str) -> dict:
    argv, env = _arm(checkout, trace, python, cache)
    with tempfile.TemporaryFile() as out:  # the report lands in a file, as `report --json > r.json` puts it
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env, cwd="/")
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{checkout}: exit {os.waitstatus_to_exitcode(status)}: {err[-300:]}")
    return {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rss_mib": ru.ru_maxrss / 1024}


def instructions(checkout: str, trace: str, python: str, cache: str) -> int:
    """The instructions of one run of the arm (after the timed runs have filled its bytecode cache)."""
    argv, env = _arm(checkout, trace, python, cache)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd="/", text=True)
    found = re.search(r"Collected\s*:\s*([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{checkout}: callgrind run failed (exit {proc.returncode}): {proc.stderr[-300:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="checkout A (the new engine)")
    ap.add_argument("--b", required=True, help="checkout B (the engine compared with)")
    ap.add_argument("-n", type=int, default=10, help="pairs counted (after one warm-up pair)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--instructions", action="store_true",
                    help="also count each arm's instructions once under valgrind's callgrind")
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt install valgrind)")
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
    for key in ("cpu", "wall", "rss_mib") if pairs else ():
        a = [p[0][key] for p in pairs]
        b = [p[1][key] for p in pairs]
        r = [x / y for x, y in zip(a, b)]
        print(f"{key:10} {statistics.median(a):9.3f} {statistics.median(b):9.3f} {statistics.median(r):11.3f}"
              f" {min(r):6.3f}-{max(r):6.3f}")
    if args.instructions:
        ia, ib = instructions(args.a, trace, args.python, ca), instructions(args.b, trace, args.python, cb)
        print(f"{'Minstr':10} {ia / 1e6:9.0f} {ib / 1e6:9.0f} {ia / ib:11.3f}   (callgrind, one run each)")


if __name__ == "__main__":
    main()
