"""One cell measured: warm-up, check against math, peak memory, then torch.utils.benchmark's
blocked_autorange; an unsupported configuration or an out-of-memory becomes the cell's status."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import time
from typing import Any

import torch
from torch.utils.benchmark import Timer

from . import refusal
from .analysis import MIN_SAMPLES
from .backends import SDPA_BACKENDS, Unsupported, prepare
from .conventions import PEAK_MEMORY
from .flops import attention_flops
from .grid import Cell, GridError

PEAK_METHOD = PEAK_MEMORY
WARMUP_CALLS = 3
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip().splitlines()
    line = next((t.strip() for t in text if t.strip()), type(exc).__name__)
    return line[:limit]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@contextlib.contextmanager
def quiet_stderr():
    """Kineto prints two log lines to file descriptor 2 at every profiler start and stop, which would
    break the progress line once per cell; the call itself already ran cleanly in the warm-up."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _cpu_peak_bytes(call) -> int:
    """Bytes allocated during one call and still live at its peak, from the profiler's memory events."""
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        call()
    cpu = torch.autograd.DeviceType.CPU
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]" and e.device_type() == cpu]
    running = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        running += e.nbytes()
        peak = max(peak, running)
    return peak


def _cuda_peak_bytes(call) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    call()
    torch.cuda.synchronize()
    return max(0, torch.cuda.max_memory_allocated() - before)


@functools.lru_cache(maxsize=None)
def device_name(device: str) -> str:
    """What the cell ran on: the GPU's name, or the CPU's model (/proc/cpuinfo)."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    from ..collector.peaks import cpu_model

    return cpu_model() or "cpu"


def peak_tflops_for(device: str, dtype: str, name: str | None = None) -> float | None:
    """The data-sheet dense 16-bit peak of the GPU (roofline/devices.py's table); None on the CPU,
    for float32 (the table holds 16-bit tensor-core peaks) and for GPUs the table lacks."""
    if device != "cuda" or dtype not in ("bfloat16", "float16"):
        return None
    from ..roofline.devices import peak_tflops

    return peak_tflops(name if name is not None else device_name(device))


def labels(cell: Cell) -> tuple[str, str, str]:
    """(label, sub_label, description) for torch.utils.benchmark.Compare: one table per shape family,
    a row per (batch, length), a column per backend."""
    kv = f" KV={cell.kv_heads}" if cell.kv_heads != cell.heads else ""
    label = (f"attention {cell.pass_} H={cell.heads}{kv} D={cell.head_dim} {cell.dtype}"
             f"{' causal' if cell.causal else ''} on {cell.device}")
    desc = cell.backend if cell.module is None else cell.module
    return label, f"B={cell.batch} L={cell.seq_len}", desc


def run_cell(cell: Cell, *, min_run_time: float = 0.2, warmup: int = WARMUP_CALLS,
             profile_dir: str | None = None) -> dict[str, Any]:
    """The record for sweep.jsonl. Never raises for the cell's own failure (except GridError, a
    mistake in the user's --module, and KeyboardInterrupt)."""
    rec: dict[str, Any] = dict(cell.key())
    rec.update(cell_id=cell.cell_id, status="ok", reason=None, median_s=None, iqr_s=None, mean_s=None, times_s=[],
               number_per_run=None, peak_bytes=None, tflops=None, tokens_per_s=None, pct_of_peak=None,
               max_abs_error=None, profile_run=None, wall_time=time.time(), device_name=device_name(cell.device),
               torch_version=torch.__version__)
    rec["flops"] = attention_flops(cell.batch, cell.heads, cell.seq_len, cell.seq_len, cell.head_dim,
                                   causal=cell.causal, pass_=cell.pass_)
    prepared = None
    stage = "preparing"
    caught: list = []
    try:
        prepared = prepare(cell)
        ctx = prepared.context

        def call():
            with ctx():
                prepared.step()

        stage = "warm-up"
        with refusal.capture() as caught:  # SDPA says why it refuses a configuration only in warnings
            call()
        refusal.replay(caught)
        caught = []
        for _ in range(max(1, warmup) - 1):
            call()
        _sync(cell.device)
        stage = "checking against math"
        if prepared.reference is not None:
            with torch.no_grad(), ctx():
                out = prepared.forward()
            try:
                ref = prepared.reference()
                rec["max_abs_error"] = float((out.float() - ref.float()).abs().max().item())
                del ref
            except Exception as e:  # the reference not fitting is no failure of this backend
                if not is_oom(e):
                    raise
                rec["reason"] = f"no check against math: the math reference ran out of memory ({first_line(e, 120)})"
            del out
        elif cell.backend == "math":
            rec["max_abs_error"] = 0.0
        stage = "peak memory"
        rec["peak_bytes"] = _cuda_peak_bytes(call) if cell.device == "cuda" else _cpu_peak_bytes(call)
        stage = "timing"
        label, sub, desc = labels(cell)
        stmt, glb = prepared.timer_args()
        timer = Timer(stmt=stmt, globals=glb, label=label, sub_label=sub, description=desc,
                      num_threads=torch.get_num_threads())
        with ctx():
            m = _at_least(timer, timer.blocked_autorange(min_run_time=min_run_time), MIN_SAMPLES)
        rec.update(median_s=m.median, iqr_s=m.iqr, mean_s=m.mean, times_s=list(m.times),
                   number_per_run=m.number_per_run, num_threads=torch.get_num_threads(), stmt=stmt)
        rec["tflops"] = rec["flops"] / m.median / 1e12
        rec["tokens_per_s"] = cell.batch * cell.seq_len / m.median
        peak = peak_tflops_for(cell.device, cell.dtype)
        if peak:
            rec["pct_of_peak"] = 100.0 * rec["tflops"] / peak
        if profile_dir is not None:
            try:
                rec["profile_run"] = _profile(cell, call, profile_dir)
            except Exception as e:  # the measurement stands without its profile
                rec["reason"] = f"no profile: {type(e).__name__}: {first_line(e, 200)}"
    except (KeyboardInterrupt, GridError):
        raise
    except Unsupported as e:
        rec.update(status="unsupported", reason=str(e))
    except Exception as e:  # the cell's failure is its result; the sweep goes on
        if is_oom(e):
            rec.update(status="oom", reason=f"{stage}: {first_line(e)}")
        elif cell.backend in SDPA_BACKENDS and isinstance(e, RuntimeError) and stage == "warm-up":
            # sdpa_kernel refused the configuration
            rec.update(status="unsupported", reason=refusal.reason(cell.backend, cell.device, e, caught,
                                                                   torch.__version__))
        elif cell.backend == "flex" and stage in ("preparing", "warm-up"):
            rec.update(status="unsupported", reason=f"{type(e).__name__}: {first_line(e)}")
        else:
            rec.update(status="error", reason=f"{stage}: {type(e).__name__}: {first_line(e)}")
    finally:
        prepared = None
    if rec["status"] in ("oom", "error"):
        # A failed call can leave tensors in reference cycles through its traceback: free them now,
        # so the next cell starts with the memory this one had (a full collection costs ~0.3 s, so
        # only here).
        gc.collect()
        if cell.device == "cuda":
            torch.cuda.empty_cache()
    if rec["status"] != "ok":
        for k in ("median_s", "iqr_s", "mean_s", "tflops", "tokens_per_s", "pct_of_peak", "number_per_run"):
            rec[k] = None
        rec["times_s"] = []
    return rec


def _at_least(timer: Timer, m, samples: int):
    """``m`` with at least ``samples`` timed blocks: more blocks of the same size where it has fewer
    (blocked_autorange keeps a single block when one call outlasts --min-run-time, and the IQR of one
    sample is 0: no spread to judge noise by)."""
    if len(m.raw_times) >= samples:
        return m
    more = [timer.timeit(m.number_per_run) for _ in range(samples - len(m.raw_times))]
    return type(m)(m.number_per_run, list(m.raw_times) + [x.raw_times[0] for x in more], m.task_spec, m.metadata)


def _profile(cell: Cell, call, profile_dir: str) -> str:
    """One call under the tb-attn collector, into ``profile_dir/<cell_id>``; returns that directory."""
    from ..collector.profile import profile

    run_dir = os.path.join(profile_dir, cell.cell_id)
    extra = {k: v for k, v in cell.key().items() if v is not None}
    with quiet_stderr(), profile(run_dir, variant=cell.backend if cell.module is None else cell.module, extra=extra,
                                  scalars=False):
        call()
        _sync(cell.device)
    return run_dir
