"""The sweep's own cost per cell against a bare torch.utils.benchmark loop over the same cells.

Bare: for each cell, make q/k/v, then ``Timer(...).blocked_autorange(min_run_time)`` under
sdpa_kernel (or the eager function): what a hand-written sweep script does. Sweep:
``tb_attn_plugin.sweep(...)`` over the same grid into a fresh logdir, which also warms up, checks
against math, measures peak memory with the profiler, appends sweep.jsonl and writes HParams and
scalars. Both in this process with one thread, alternating which goes first; the median of the
repeats is reported. ``--memory-cap`` adds the capped child process (its start is part of the cost).

    .venv/bin/python bench/sweep_overhead.py --repeat 3
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


def swept(backends, lens, batches, heads, head_dim, min_run_time, cap, hparams) -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        tb_attn_plugin.sweep(d, backends=",".join(backends), seq_len=",".join(map(str, lens)),
                             batch=",".join(map(str, batches)), heads=heads, head_dim=head_dim, dtype="float32",
                             device="cpu", min_run_time=min_run_time, warmup=3, memory_cap=cap, hparams=hparams,
                             progress=False, out=False)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="math,flash,eager")
    ap.add_argument("--seq-len", default="128,256,512")
    ap.add_argument("--batch", default="1,4")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--min-run-time", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    backends = args.backends.split(",")
    lens = [int(x) for x in args.seq_len.split(",")]
    batches = [int(x) for x in args.batch.split(",")]
    cells = len(backends) * len(lens) * len(batches)
    shape = (backends, lens, batches, args.heads, args.head_dim, args.min_run_time)
    arms = {"bare Timer loop": lambda: bare(*shape),
            "tb-attn sweep": lambda: swept(*shape, None, True),
            "tb-attn sweep, no HParams": lambda: swept(*shape, None, False),
            "tb-attn sweep --memory-cap 4G": lambda: swept(*shape, 4 * 2**30, True)}
    bare(*shape)  # warm the allocator and the kernels once before anything is timed
    got: dict[str, list[float]] = {k: [] for k in arms}
    names = list(arms)
    for i in range(args.repeat):
        for name in names[i % len(names):] + names[:i % len(names)]:
            got[name].append(arms[name]())
    base = statistics.median(got["bare Timer loop"]) / cells
    print(f"{cells} cells ({args.backends} x L={args.seq_len} x B={args.batch}, H={args.heads}, D={args.head_dim}, "
          f"float32, 1 thread), min_run_time {args.min_run_time} s, median of {args.repeat}; torch {torch.__version__}")
    print("| arm | s per cell | overhead per cell vs bare |")
    print("|---|---:|---:|")
    for name in names:
        per = statistics.median(got[name]) / cells
        print(f"| {name} | {per:.3f} | {'-' if name == names[0] else f'{(per - base) * 1e3:+.0f} ms'} |")


if __name__ == "__main__":
    main()
