"""The sweep's own cost per cell against a bare torch.utils.benchmark loop over the same cells.

Bare: for each cell, make q/k/v, then ``Timer(...).blocked_autorange(min_run_time)`` under
sdpa_kernel (or the eager function): what a hand-written sweep script does. Sweep:
``tb_attn_plugin.sweep(...)`` over the same grid into a fresh logdir, which also warms up, checks
against math, measures peak memory with the profiler, appends sweep.jsonl and writes HParams and
scalars. Both in this process with one thread, alternating which goes first; the median of the
repeats is reported. ``--memory-cap`` adds the capped child process (its start is part of the cost).

    .venv/bin/python bench/sweep_overhead.py --repeat 3 --breakdown

``--breakdown`` runs the sweep once more under cProfile and prints where its time per cell goes.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.benchmark import Timer  # noqa: E402

import tb_attn_plugin  # noqa: E402

PINNED = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}


def bare(backends, lens, batches, heads, head_dim, min_run_time) -> float:
    t0 = time.perf_counter()
    for L in lens:
        for b in batches:
            for backend in backends:
                q, k, v = (torch.randn(b, heads, L, head_dim) for _ in range(3))
                if backend == "eager":
                    scale = 1 / math.sqrt(head_dim)

                    def fn():
                        torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v

                    Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
                else:
                    with sdpa_kernel(PINNED[backend]):
                        Timer("F.scaled_dot_product_attention(q, k, v)",
                              globals={"F": F, "q": q, "k": k, "v": v}).blocked_autorange(min_run_time=min_run_time)
    return time.perf_counter() - t0


GAPS: dict[str, list[float]] = {}


def swept(backends, lens, batches, heads, head_dim, min_run_time, cap, hparams, arm: str = "") -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        recs = tb_attn_plugin.sweep(d, backends=",".join(backends), seq_len=",".join(map(str, lens)),
                             batch=",".join(map(str, batches)), heads=heads, head_dim=head_dim, dtype="float32",
                             device="cpu", min_run_time=min_run_time, warmup=3, memory_cap=cap, summaries=hparams,
                             progress=False, out=False)
        took = time.perf_counter() - t0
    # The steady state: time between consecutive cells' records (leaves out one-time starts).
    walls = [r["wall_time"] for r in recs]
    GAPS.setdefault(arm, []).append(statistics.median(b - a for a, b in zip(walls, walls[1:])))
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="math,flash,eager")
    ap.add_argument("--seq-len", default="128,256,512")
    ap.add_argument("--batch", default="1,4")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--min-run-time", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--breakdown", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    backends = args.backends.split(",")
    lens = [int(x) for x in args.seq_len.split(",")]
    batches = [int(x) for x in args.batch.split(",")]
    cells = len(backends) * len(lens) * len(batches)
    shape = (backends, lens, batches, args.heads, args.head_dim, args.min_run_time)
    arms = {"bare Timer loop": lambda: bare(*shape),
            "tb-attn sweep": lambda: swept(*shape, None, True, "tb-attn sweep"),
            "tb-attn sweep, no HParams": lambda: swept(*shape, None, False, "tb-attn sweep, no HParams"),
            "tb-attn sweep --memory-cap 4G": lambda: swept(*shape, 4 * 2**30, True, "tb-attn sweep --memory-cap 4G")}
    bare(*shape)  # warm the allocator and the kernels once before anything is timed
    got: dict[str, list[float]] = {k: [] for k in arms}
    names = list(arms)
    for i in range(args.repeat):
        for name in names[i % len(names):] + names[:i % len(names)]:
            got[name].append(arms[name]())
    base = statistics.median(got["bare Timer loop"]) / cells
    print(f"{cells} cells ({args.backends} x L={args.seq_len} x B={args.batch}, H={args.heads}, D={args.head_dim}, "
          f"float32, 1 thread), min_run_time {args.min_run_time} s, median of {args.repeat}; torch {torch.__version__}")
    print("| arm | s per cell | overhead per cell vs bare | steady-state s per cell |")
    print("|---|---:|---:|---:|")
    for name in names:
        per = statistics.median(got[name]) / cells
        gap = f"{statistics.median(GAPS[name]):.3f}" if name in GAPS else "-"
        print(f"| {name} | {per:.3f} | {'-' if name == names[0] else f'{(per - base) * 1e3:+.0f} ms'} | {gap} |")
    print(f"\nthe capped child's start (spawn, torch import, thread and profiler warm-up; once per sweep): "
          f"{child_start():.2f} s")
    if args.breakdown:
        breakdown(shape, cells)


def child_start() -> float:
    from tb_attn_plugin.sweeps.grid import Cell
    from tb_attn_plugin.sweeps.limits import CappedWorker

    tiny = Cell("math", 1, 16, 1, 1, 8, "float32", False, "fwd", "cpu")
    t0 = time.perf_counter()
    w = CappedWorker(4 * 2**30)
    try:
        w.run(tiny, min_run_time=1e-4, warmup=1)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        w.run(tiny, min_run_time=1e-4, warmup=1)
        second = time.perf_counter() - t1
    finally:
        w.close()
    return first - second


PARTS = {  # (file suffix, function) -> what it is
    ("timer.py", "blocked_autorange"): "blocked_autorange (the measurement itself)",
    ("measure.py", "call"): "warm-up calls and the one call whose peak memory is measured",
    ("measure.py", "_cpu_peak_bytes"): "peak memory: that call under torch.profiler (the call included)",
    ("backends.py", "reference"): "the math reference for the error check",
    ("store.py", "write"): "appending and fsyncing sweep.jsonl",
    ("tblog.py", "cell"): "HParams session and scalars",
}


def breakdown(shape, cells) -> None:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    swept(*shape, None, True)
    prof.disable()
    stats = pstats.Stats(prof).stats
    total = sum(v[3] for (f, _, fn), v in stats.items() if f.endswith("runner.py") and fn == "run_sweep")
    print(f"\nwhere the sweep's {total / cells * 1e3:.0f} ms per cell go (cProfile, cumulative, per cell):")
    print("| part | ms per cell |")
    print("|---|---:|")
    for (suffix, func), text in PARTS.items():
        t = sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(suffix) and fn == func)
        print(f"| {text} | {t / cells * 1e3:.1f} |")


if __name__ == "__main__":
    main()
