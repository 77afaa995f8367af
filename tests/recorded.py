"""Small real traces the suite records itself (torch.profiler on the CPU), so that every plugin,
browser, cache, pool and CLI test runs in a clone without ../shared/traces.

``record_roles(out)`` writes one gzip trace per role into ``out`` (as ``{role}.json.gz``); the
conftest fixture ``recorded_traces`` calls it once per session in the same subprocess that records
``handler_runs``, so the test process itself never imports torch. Roles, by what tests need:

    small     one SDPA call, forward only, one step: the smallest trace with attention (fuzzing, 1000 runs)
    sdpa      two SDPA layers, forward and backward (fused CPU attention)
    math      two layers, SDPA pinned to the math backend with dropout
    eager     two hand-written attention layers (matmul, softmax, dropout, matmul)
    negative  an MLP with log_softmax, forward and backward: no attention at all
    tail      the trace torch.profiler writes when a loop ends one step into a window (the README's
              schedule wait=1, warmup=1, active=2 without repeat, over 6 steps): an empty step, no attention
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

ROLES = ("small", "sdpa", "math", "eager", "negative")


def record_roles(out: str | os.PathLike) -> dict[str, Path]:
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile

    from tests.cpu_models import Attn, B, D, L

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for role in ROLES:
        torch.manual_seed(0)
        if role == "negative":
            m = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D), nn.LogSoftmax(-1))
        else:
            layers = 1 if role == "small" else 2
            m = nn.Sequential(*[Attn("sdpa" if role == "small" else role) for _ in range(layers)])
            for i, layer in enumerate(m):
                layer.path = f"blocks.{i}.attn"
        x = torch.randn(B, L, D)
        for _ in range(2):  # warm-up outside the profile: one-time initialisation (autograd's engine thread,
            m(x).sum().backward()  # the first dropout's generator, allocator growth) is not part of the trace
        plain = out / f"{role}.json"
        # The fastest of three recordings: on a loaded machine one step can be preempted for
        # milliseconds, and tests compare runs' times (SDPA faster than eager, say).
        best = None
        for _ in range(3):
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                t0 = time.perf_counter()
                if role == "small":
                    with torch.no_grad():
                        m(x)
                else:
                    m(x).sum().backward()
                took = time.perf_counter() - t0
            if best is None or took < best:
                best = took
                prof.export_chrome_trace(str(plain))
        data = plain.read_bytes()
        json.loads(data)  # a recording that is not JSON must fail here, not in some later test
        paths[role] = out / f"{role}.json.gz"
        paths[role].write_bytes(gzip.compress(data, mtime=0))
        plain.unlink()
    paths["tail"] = _record_tail(out)
    return paths


def _record_tail(out: Path) -> Path:
    """The last trace of a 6-step loop under schedule(wait=1, warmup=1, active=2): torch writes the
    cut-short second window on exit."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from tests.cpu_models import B, D, L, model

    written: list[Path] = []

    def save(prof):
        written.append(out / f"tail{len(written)}.json")
        prof.export_chrome_trace(str(written[-1]))

    m, x = model("sdpa"), torch.randn(B, L, D)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=2), on_trace_ready=save) as prof:
        for _ in range(6):
            m(x).sum().backward()
            prof.step()
    assert len(written) == 2, f"expected a full window and a cut-short one, got {len(written)} traces"
    dst = out / "tail.json.gz"
    dst.write_bytes(gzip.compress(written[-1].read_bytes(), mtime=0))
    for w in written:
        w.unlink()
    return dst


# --- traces named as users name them (bert.pt.trace.json.gz): worker and span only inside -------------

_RANK = r"""
import gzip, sys, torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[4])
from tests.cpu_models import B, D, L, model
rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
torch.manual_seed(0)
m, x = model("sdpa"), torch.randn(B, L, D)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    m(x).sum().backward()
    dist.barrier()
prof.export_chrome_trace(f"{out}.json")
dist.destroy_process_group()
"""


def record_nameless(out: str | os.PathLike) -> dict[str, Path]:
    """Real traces whose worker and span are only inside them (trace/head.py), exported with
    ``export_chrome_trace`` as a user's own script does, gzip-compressed:

        first, second   two profiles of one process, ``second`` recorded after ``first`` (one worker, two spans)
        rank0, rank1    one profile per rank of a two-process gloo job (distributedInfo says rank and world size)
    """
    import socket
    import subprocess
    import sys

    import torch
    from torch.profiler import ProfilerActivity, profile

    from tests.cpu_models import B, D, L, model

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for role in ("first", "second"):
        torch.manual_seed(0)
        m, x = model("eager" if role == "first" else "sdpa"), torch.randn(B, L, D)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            m(x).sum().backward()
        prof.export_chrome_trace(str(out / f"{role}.json"))
        time.sleep(0.01)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", _RANK, str(r), str(port), str(out / f"rank{r}"), repo], env=env)
             for r in (0, 1)]
    for p in procs:
        if p.wait(timeout=240) != 0:
            raise RuntimeError(f"a rank of the gloo job failed (exit {p.returncode})")
    paths = {}
    for role in ("first", "second", "rank0", "rank1"):
        plain = out / f"{role}.json"
        data = plain.read_bytes()
        json.loads(data)
        paths[role] = out / f"{role}.json.gz"
        paths[role].write_bytes(gzip.compress(data, mtime=0))
        plain.unlink()
    return paths
