"""Collector overhead, side by side in one process, on the demo's small transformer (CPU by default).

1. profiling: steps under plain torch.profiler.profile vs under tb_attn_plugin.profile, same options
   (CPU activity, record_shapes=True), rounds interleaved A B A B ... (goal: at most 3% slower);
2. not profiling: plain steps before the collector is imported vs plain steps after it was imported
   and a profiling window opened and closed (goal: no measurable difference).

    .venv/bin/python bench/collector_overhead.py [--variant sdpa] [--length 256] [--rounds 6] [--steps 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from demo import models  # noqa: E402


def step_times(model, ids, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        models.loss_fn(model, ids).backward()
        out.append(time.perf_counter() - t)
    return out


def under(prof_ctx, model, ids, n: int) -> list[float]:
    with prof_ctx as prof:
        step_times(model, ids, 2)  # warm the profiler's first steps
        prof.step()
        ts = []
        for _ in range(n):
            ts += step_times(model, ids, 1)
            prof.step()
    return ts


def summary(name: str, ts: list[float]) -> float:
    med = statistics.median(ts)
    print(f"  {name:<44} median {med * 1e3:8.2f} ms/step  (n={len(ts)}, min {min(ts) * 1e3:.2f}, max {max(ts) * 1e3:.2f})")
    return med


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="sdpa", choices=("sdpa", "eager", "sdpa-math"))
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    torch.manual_seed(0)
    model = models.TinyTransformer(args.variant)
    ids = torch.randint(0, models.VOCAB, (args.batch, args.length))
    acts = [torch.profiler.ProfilerActivity.CPU]
    print(f"model: demo TinyTransformer ({args.variant}), L={args.length}, batch {args.batch}, fwd+bwd, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    # 2a. plain steps before the collector is imported
    assert "tb_attn_plugin.collector.profile" not in sys.modules
    step_times(model, ids, 3)
    before = [t for _ in range(args.rounds) for t in step_times(model, ids, args.steps)]

    import tb_attn_plugin

    out = tempfile.mkdtemp(prefix="tb_attn_bench_")
    plain, coll = [], []
    for r in range(args.rounds):
        plain += under(torch.profiler.profile(activities=acts, record_shapes=True), model, ids, args.steps)
        coll += under(tb_attn_plugin.profile(os.path.join(out, f"r{r}"), model=model, activities=acts,
                                             record_shapes=True, scalars=False), model, ids, args.steps)
    # 2b. plain steps after: the collector imported, its windows closed
    after = [t for _ in range(args.rounds) for t in step_times(model, ids, args.steps)]

    print("1. profiling (same options: CPU, record_shapes=True)")
    a = summary("plain torch.profiler.profile", plain)
    b = summary("tb_attn_plugin.profile (tagging on)", coll)
    print(f"  => collector overhead {100 * (b / a - 1):+.1f}%  (goal: <= +3%)")
    print("2. not profiling")
    c = summary("plain steps, collector not imported", before)
    d = summary("plain steps, collector imported, window closed", after)
    print(f"  => difference {100 * (d / c - 1):+.1f}%  (goal: none measurable)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
