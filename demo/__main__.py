"""Profile attention variants at several sequence lengths into runs/<variant>-L<len>/, forward and
backward, then print the TensorBoard command. CPU by default; ``--device cuda`` when there is one.

    python -m demo                       # all variants at L = 128, 512, 1024
    python -m demo --variants sdpa eager --lengths 256 512
    python -m demo --device cuda --variants sdpa-flash sdpa-efficient sdpa-cudnn sdpa-math flex
    python -m demo --post                # the six variants of "Attention is all you profile" (demo/post.py)
    python -m demo --post --device cuda --dtype bfloat16 --lengths 1024
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import torch

import tb_attn_plugin

from . import models, post
from .quiet import without_usdt_lines

VARIANTS = ("eager", "sdpa", "sdpa-math", "compiled", "hf-eager", "hf-sdpa")  # the default set, CPU-friendly
# Asked for by name: SDPA pinned to one backend, and FlexAttention. The CPU has no efficient or cuDNN
# kernel and FlexAttention has no CPU backward, so those need --device cuda.
MORE_VARIANTS = ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "flex")
GPU_ONLY = ("sdpa-efficient", "sdpa-cudnn", "flex")
LENGTHS = (128, 512, 1024)
# Profiled steps per run: the per-step spread is what says whether two runs differ (compare's
# Mann-Whitney test needs 5 steps each to reach p < 0.01) and whether a Scaling point is reliable.
STEPS = 5


def build(variant: str, device: str):
    """(model to profile, loss function, model to run) for a variant."""
    torch.manual_seed(0)
    if variant.startswith("hf-"):
        m = models.tiny_llama(variant[3:]).to(device)
        return m, models.hf_loss_fn, m
    m = models.TinyTransformer("sdpa" if variant == "compiled" else variant).to(device)
    if variant == "compiled":
        # dynamic: one compilation for every length instead of one per length
        cm = torch.compile(m, dynamic=True)
        return cm, models.loss_fn, cm
    return m, models.loss_fn, m


def profile_one(variant: str, length: int, args, built) -> str:
    model, loss_fn, run = built
    ids = torch.randint(0, models.VOCAB, (args.batch, length), device=args.device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    logdir = os.path.join(args.logdir, f"{variant}-L{length}")
    sched = torch.profiler.schedule(wait=0, warmup=1, active=args.steps, repeat=1)
    with tb_attn_plugin.profile(logdir, model=model, variant=variant, schedule=sched, memory=True,
                                extra={"seq_len": length, "batch": args.batch}) as prof:
        for _ in range(1 + args.steps):
            opt.zero_grad(set_to_none=True)
            loss_fn(run, ids).backward()
            opt.step()
            prof.step()
    r = prof.reports[-1] if prof.reports else None
    share = f"{100 * r['attention_share']:.0f}% attention, {r['calls']} calls" if r else "no report"
    return f"{logdir}: {share}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--logdir", default="runs")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS + MORE_VARIANTS)
    p.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=None,
                   help=f"profiled steps per run, after one warmup step (default {STEPS}; with --post 1)")
    p.add_argument("--post", action="store_true",
                   help="profile the post's attention variants instead (forward only under no_grad; demo/post.py): "
                        f"on the CPU {' '.join(post.CPU_VARIANTS)}, on CUDA {' '.join(post.CUDA_VARIANTS)}")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                   help="dtype of --post's q, k, v (the post used bfloat16 on an A100)")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available")
    if any(n < 2 for n in args.lengths):
        p.error("--lengths: each length must be at least 2")
    if args.steps is not None and args.steps < 1:
        p.error("--steps: at least 1")
    args.steps = args.steps or (1 if args.post else STEPS)
    if args.post:
        return _post(args)
    gpu_only = [v for v in args.variants if v in GPU_ONLY]
    if gpu_only and not args.device.startswith("cuda"):
        p.error(f"--variants {' '.join(gpu_only)}: these need --device cuda (the CPU has no such kernel or backward)")
    variants = list(args.variants)
    if importlib.util.find_spec("transformers") is None:
        skipped = [v for v in variants if v.startswith("hf-")]
        variants = [v for v in variants if not v.startswith("hf-")]
        if skipped:
            print(f"skipping {', '.join(skipped)}: transformers is not installed", file=sys.stderr)
    t0 = time.perf_counter()
    with without_usdt_lines():
        for variant in variants:
            built = build(variant, args.device)
            for length in args.lengths:
                t = time.perf_counter()
                line = profile_one(variant, length, args, built)
                print(f"{line} ({time.perf_counter() - t:.1f} s)", flush=True)
    print(f"done in {time.perf_counter() - t0:.0f} s. Open the Attention tab with:\n\n"
          f"    tensorboard --logdir {args.logdir}\n")
    return 0


def _post(args) -> int:
    """The post's variants, those the device runs, one run each per length."""
    variants = post.CUDA_VARIANTS if args.device.startswith("cuda") else post.CPU_VARIANTS
    with without_usdt_lines():
        for variant in variants:
            for length in args.lengths:
                print(post.profile_variant(variant, length, args.logdir, device=args.device,
                                           dtype=getattr(torch, args.dtype), batch=args.batch, steps=args.steps),
                      flush=True)
    print(f"done. Read them with:\n\n    tb-attn report {args.logdir}\n    tensorboard --logdir {args.logdir}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
