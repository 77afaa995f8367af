"""Collector overhead, side by side in one process, on the demo's small transformer (CPU by default).

1. profiling: steps under plain torch.profiler.profile vs under tb_attn_plugin.profile, same options
   (CPU activity, record_shapes=True), rounds interleaved, which arm goes first alternating
   (goal: at most 3% slower);
2. not profiling: plain steps before the collector is imported vs plain steps after it was imported
   and a profiling window opened and closed (goal: no measurable difference);
3. per attention call: the time tagging adds to one small F.scaled_dot_product_attention call inside
   a profiling window (fastest of many loops per arm, arms alternating). On a shared machine step
   times swing by more than the goal; this cost, times the calls per step, bounds the overhead.

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
    """Step times under a profiler, prof.step() included (a training loop pays for it too)."""
    with prof_ctx as prof:
        step_times(model, ids, 2)  # warm the profiler's first steps
        prof.step()
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            models.loss_fn(model, ids).backward()
            prof.step()
            ts.append(time.perf_counter() - t)
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
    plain, coll, ratios = [], [], []
    for r in range(args.rounds):
        # Alternate which arm goes first: whatever drifts during a run (allocator, caches, clocks)
        # then falls on both arms alike instead of always on the second.
        arms = [("plain", lambda: torch.profiler.profile(activities=acts, record_shapes=True)),
                ("coll", lambda r=r: tb_attn_plugin.profile(os.path.join(out, f"r{r}"), model=model, activities=acts,
                                                            record_shapes=True, scalars=False))]
        got = {}
        for name, make in (arms if r % 2 == 0 else arms[::-1]):
            got[name] = under(make(), model, ids, args.steps)
        plain += got["plain"]
        coll += got["coll"]
        ratios.append(statistics.median(got["coll"]) / statistics.median(got["plain"]))
    # 2b. plain steps after: the collector imported, its windows closed
    after = [t for _ in range(args.rounds) for t in step_times(model, ids, args.steps)]

    print("1. profiling (same options: CPU, record_shapes=True)")
    a = summary("plain torch.profiler.profile", plain)
    b = summary("tb_attn_plugin.profile (tagging on)", coll)
    print(f"  => collector overhead {100 * (b / a - 1):+.1f}%  (goal: <= +3%)")
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"  => per round (same round, order alternated): median {100 * (statistics.median(ratios) - 1):+.1f}%, "
          f"middle half {100 * (q[0] - 1):+.1f}% .. {100 * (q[2] - 1):+.1f}% over {len(ratios)} rounds")
    print(f"  fastest step: plain {min(plain) * 1e3:.2f} ms, collector {min(coll) * 1e3:.2f} ms "
          f"({100 * (min(coll) / min(plain) - 1):+.1f}%)")
    print("2. not profiling")
    c = summary("plain steps, collector not imported", before)
    d = summary("plain steps, collector imported, window closed", after)
    print(f"  => difference {100 * (d / c - 1):+.1f}%  (goal: none measurable)")
    per_call(acts, out, model, ids, min(plain))
    return 0


def per_call(acts, out: str, model, ids, step_s: float, loops: int = 16, calls: int = 200) -> None:
    import torch.nn.functional as F

    import tb_attn_plugin

    q = torch.randn(1, 2, 16, 8)

    class Attn(torch.nn.Module):
        def forward(self, x):
            return F.scaled_dot_product_attention(x, x, x, is_causal=True)

    m = Attn()

    def loop() -> float:
        t = time.perf_counter()
        for _ in range(calls):
            m(q)
        return (time.perf_counter() - t) / calls

    best = {"plain": float("inf"), "coll": float("inf")}
    arms = [("plain", lambda: torch.profiler.profile(activities=acts, record_shapes=True)),
            ("coll", lambda: tb_attn_plugin.profile(os.path.join(out, "per_call"), model=m, activities=acts,
                                                    record_shapes=True, scalars=False))]
    for r in range(loops):
        for name, make in (arms if r % 2 == 0 else arms[::-1]):
            with make():
                loop()  # warm
                best[name] = min(best[name], loop())
    added = best["coll"] - best["plain"]
    # How many attention calls one training step of the model makes (forward; backward has no wrapper).
    n = 0
    orig = F.scaled_dot_product_attention

    def counting(*a, **k):
        nonlocal n
        n += 1
        return orig(*a, **k)

    F.scaled_dot_product_attention = counting
    try:
        with torch.no_grad():
            models.loss_fn(model, ids)
    finally:
        F.scaled_dot_product_attention = orig
    print("3. per attention call (fastest of", loops, "loops of", calls, "calls per arm)")
    print(f"  plain {best['plain'] * 1e6:.1f} us/call, tagged {best['coll'] * 1e6:.1f} us/call: "
          f"tagging adds {added * 1e6:.1f} us per call")
    if n:
        print(f"  => this model: {n} attention calls per step x {added * 1e6:.1f} us = {n * added * 1e3:.3f} ms "
              f"of a {step_s * 1e3:.2f} ms step ({100 * n * added / step_s:+.2f}%)  (goal: <= +3%)")


if __name__ == "__main__":
    sys.exit(main())
