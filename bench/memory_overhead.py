"""What ``tb_attn_plugin.profile(..., memory=True)`` costs on the CPU, in one process, on the demo's
small transformer: step time with and without it (rounds interleaved, the arm that goes first
alternating), and the trace size and analysis time it adds. On the CPU memory=True means
``profile_memory=True`` (a CUDA machine also records allocator history: not measured here).

    .venv/bin/python bench/memory_overhead.py --variant eager --length 512 --rounds 8
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from collector_overhead import summary, under  # noqa: E402
from demo import models  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", default="eager", choices=("sdpa", "eager", "sdpa-math"))
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    logging.getLogger("tb_attn_plugin").setLevel(logging.ERROR)  # the once-said CPU note
    import tb_attn_plugin
    from tb_attn_plugin.report.build import analyze_file

    torch.manual_seed(0)
    model = models.TinyTransformer(args.variant)
    ids = torch.randint(0, models.VOCAB, (args.batch, args.length))
    acts = [torch.profiler.ProfilerActivity.CPU]
    print(f"model: demo TinyTransformer ({args.variant}), L={args.length}, batch {args.batch}, fwd+bwd, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, CUDA {torch.cuda.is_available()}")
    out = tempfile.mkdtemp(prefix="tb_attn_mem_bench_")
    times: dict[str, list[float]] = {"off": [], "on": []}
    ratios = []
    for r in range(args.rounds):
        arms = [("off", lambda r=r: tb_attn_plugin.profile(os.path.join(out, f"off{r}"), model=model, activities=acts,
                                                            scalars=False)),
                ("on", lambda r=r: tb_attn_plugin.profile(os.path.join(out, f"on{r}"), model=model, activities=acts,
                                                           scalars=False, memory=True))]
        got = {}
        for name, make in (arms if r % 2 == 0 else arms[::-1]):
            got[name] = under(make(), model, ids, args.steps)
            times[name] += got[name]
        ratios.append(statistics.median(got["on"]) / statistics.median(got["off"]))
    a = summary("tb_attn_plugin.profile", times["off"])
    b = summary("tb_attn_plugin.profile(memory=True)", times["on"])
    print(f"  => memory=True adds {100 * (b / a - 1):+.1f}% per step (median of all steps); per round: median "
          f"{100 * (statistics.median(ratios) - 1):+.1f}% over {len(ratios)} rounds; fastest step "
          f"{100 * (min(times['on']) / min(times['off']) - 1):+.1f}%")
    for name in ("off", "on"):
        files = sorted(glob.glob(os.path.join(out, f"{name}0", "*.pt.trace.json.gz")))
        size = sum(os.path.getsize(f) for f in files)
        t = time.perf_counter()
        rep = analyze_file(files[-1])
        dt = time.perf_counter() - t
        mem = rep.get("memory")
        print(f"  {name:>3}: trace {size / 1e6:.2f} MB gzip, analysed in {dt:.2f} s, "
              f"{mem['events'] if mem else 0} allocation events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
