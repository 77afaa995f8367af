"""``tb-attn sweep`` / ``tb_attn_plugin.sweep(...)``: run the grid, skipping finished cells, and log
every cell to sweep.jsonl, TensorBoard's HParams and scalars, and the Compare table."""

from __future__ import annotations

import io
import logging
import os
import sys
from typing import Any

from . import analysis, store
from .flops import CONVENTION
from ..text.units import duration_text
from .grid import BACKENDS, Cell, Grid, GridError, cell_key, parse_bytes, parse_ints, parse_names
from .progress import SweepProgress
from .table import metrics_table

log = logging.getLogger(__name__)
PROFILE_DIR = "profiles"


class SweepResult(list):
    """The sweep's records (previous and new, in grid order) with ``measured``, ``skipped`` and
    ``interrupted`` as attributes."""

    measured: int = 0
    skipped: int = 0
    interrupted: bool = False
    logdir: str = ""


def _as_list(v: Any, what: str) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v
    raise GridError(f"--{what}: expected numbers, not {type(v).__name__}")


def build_grid(*, backends, seq_len, batch, heads, head_dim, kv_heads, dtype, causal, pass_, device,
               module) -> Grid:
    names = parse_names(backends, "backends", BACKENDS) if backends else []
    modules = [module] if isinstance(module, str) else list(module or [])
    return Grid(backends=names, seq_lens=parse_ints(_as_list(seq_len, "seq-len"), "seq-len"),
                batches=parse_ints(_as_list(batch, "batch"), "batch"), heads=int(heads), head_dim=int(head_dim),
                kv_heads=None if kv_heads is None else int(kv_heads), dtype=dtype, causal=bool(causal),
                pass_=pass_, device=device, modules=modules)


def compare_table(records: list[dict[str, Any]]) -> str:
    """torch.utils.benchmark.Compare over every measured cell, rebuilt from the stored times."""
    from torch.utils.benchmark import Compare, Measurement
    from torch.utils.benchmark.utils.common import TaskSpec

    from .measure import labels

    ms = []
    for r in records:
        if r["status"] != "ok" or not r.get("times_s") or not r.get("number_per_run"):
            continue
        cell = Cell.from_key(r)
        label, sub, desc = labels(cell)
        n = int(r["number_per_run"])
        spec = TaskSpec(stmt=r.get("stmt") or "step()", setup="pass", label=label, sub_label=sub, description=desc,
                        num_threads=int(r.get("num_threads") or 1))
        ms.append(Measurement(n, [t * n for t in r["times_s"]], spec))
    if not ms:
        return "(no cell was measured)"
    c = Compare(ms)
    c.highlight_warnings()  # "(! 12%)": the IQR is a large part of the median (a noisy cell)
    buf = io.StringIO()
    saved, sys.stdout = sys.stdout, buf
    try:
        c.print()
    finally:
        sys.stdout = saved
    return buf.getvalue().rstrip()


def _check_device(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise GridError(f"--device cuda: torch {torch.__version__} sees no CUDA device here")


def _warn_other_machine(previous: list[dict[str, Any]], device: str, path: str) -> None:
    """A sweep is about one machine: cells of the same configuration measured on another GPU (or
    torch) are not measured again, so say that they are there."""
    import torch

    from .measure import device_name

    here = (device_name(device), torch.__version__)
    other = sorted({(str(r.get("device_name")), str(r.get("torch_version"))) for r in previous
                    if r.get("device") == device and r.get("device_name")} - {here})
    if other:
        names = "; ".join(f"{n} with torch {v}" for n, v in other[:3])
        print(f"tb-attn sweep: warning: {path} holds cells measured on {names}; this is {here[0]} with torch "
              f"{here[1]}, and cells already there are not measured again (another --logdir keeps machines apart)",
              file=sys.stderr)


def run_sweep(logdir: str, *, backends: str | list[str] | None = "math,flash,efficient,cudnn,eager",
              seq_len: Any = "128,512,2048", batch: Any = "1,8", heads: int = 16, head_dim: int = 64,
              kv_heads: int | None = None, dtype: str | None = None, causal: bool = False, pass_: str = "fwd",
              device: str | None = None, module: str | list[str] | None = None, min_run_time: float = 0.2,
              warmup: int = 3, memory_cap: int | str | None = None, profile: bool | Any = False,
              threads: int | None = None, summaries: bool = True, hparams_logdir: str | None = None,
              progress: bool = True,
              out=None) -> SweepResult:
    """Measure every cell not already in ``logdir/sweep.jsonl``; see ``tb-attn sweep --help``.
    ``out``: where the Compare table goes (default stdout; False: nowhere).
    ``profile``: True (every measured cell) or sequence lengths (``"512"``, ``[512, 2048]``) whose
    cells get one tb-attn trace each under ``logdir/profiles/<cell_id>/``.
    ``summaries``: the sweep's scalars in one TensorBoard run (``logdir``); ``hparams_logdir``: also one
    HParams session per cell under ``hparams_logdir/<name of logdir>/`` (tblog.py says why not in logdir)."""
    import torch

    out = None if out is False else (out if out is not None else sys.stdout)  # False: print nothing
    if device is not None and device not in ("cpu", "cuda"):
        raise GridError(f"--device: unknown {device!r}; expected cpu or cuda")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype is None:
        dtype = "bfloat16" if device == "cuda" else "float32"
    if not isinstance(min_run_time, (int, float)) or min_run_time <= 0:
        raise GridError(f"--min-run-time must be a positive number of seconds, not {min_run_time!r}")
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise GridError(f"--threads must be at least 1, not {threads!r}")
        torch.set_num_threads(threads)  # the Timer measures with the process's thread count
    if not isinstance(warmup, int) or warmup < 1:
        raise GridError(f"--warmup must be at least 1, not {warmup!r}")
    grid = build_grid(backends=backends, seq_len=seq_len, batch=batch, heads=heads, head_dim=head_dim,
                      kv_heads=kv_heads, dtype=dtype, causal=causal, pass_=pass_, device=device, module=module)
    _check_device(device)
    cap = parse_bytes(memory_cap) if isinstance(memory_cap, str) else memory_cap
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        raise GridError(f"--memory-cap must be a positive size, not {memory_cap!r}")
    profile_lens: set[int] | None = None  # None: profile nothing
    if profile is True:
        profile_lens = set(grid.seq_lens)
    elif profile:
        profile_lens = set(parse_ints(_as_list(profile, "profile"), "profile"))
    if grid.modules:
        from .backends import load_factory

        for m in grid.modules:
            load_factory(m)  # a wrong --module is one line before anything is measured

    os.makedirs(logdir, exist_ok=True)
    previous, bad_lines = store.read(logdir)
    if bad_lines:
        log.warning("%s: %d line(s) that are not sweep cells were skipped", store.path_in(logdir), bad_lines)
    _warn_other_machine(previous, device, store.path_in(logdir))
    done = {cell_key(r): r for r in previous}
    cells = grid.cells_list()
    todo = [c for c in cells if cell_key(c.key()) not in done]
    result = SweepResult()
    result.logdir = logdir
    result.skipped = len(cells) - len(todo)
    print(f"tb-attn sweep: {len(cells)} cells, {result.skipped} already in {store.path_in(logdir)}, "
          f"{len(todo)} to measure on {device}", file=sys.stderr if progress else io.StringIO())

    worker = None
    cuda_cap_before = None
    if cap is not None and device == "cpu" and todo:
        from .limits import CappedWorker

        worker = CappedWorker(cap)
    elif cap is not None and device == "cuda":
        from .limits import apply_cuda_cap

        cuda_cap_before = apply_cuda_cap(cap)
    tb = None
    if summaries or hparams_logdir:
        try:
            from .tblog import SweepLogger

            tb = SweepLogger(logdir, hparams_logdir)
        except ImportError as e:  # tensorboard is an extra: the sweep still runs without it
            log.warning("no TensorBoard summaries (%s); install tensorboard for the HParams tab", e)
    appender = store.Appender(logdir)
    bar = SweepProgress(len(todo), enabled=progress)
    new: dict[tuple, dict[str, Any]] = {}
    profile_root = os.path.join(logdir, PROFILE_DIR)
    try:
        for cell in todo:
            what = f"{cell.module or cell.backend} B={cell.batch} L={cell.seq_len}"
            bar.start(what)
            kwargs = {"min_run_time": float(min_run_time), "warmup": warmup,
                      "profile_dir": profile_root if profile_lens and cell.seq_len in profile_lens else None}
            if worker is not None:
                try:
                    rec = worker.run(cell, **kwargs)
                except RuntimeError as e:  # the child died: record it, start a new one, go on
                    from .limits import CappedWorker

                    rec = dict(cell.key(), cell_id=cell.cell_id, status="error", reason=str(e))
                    worker.close()
                    worker = CappedWorker(cap)
            else:
                from .measure import run_cell

                rec = run_cell(cell, **kwargs)
            rec["memory_cap_bytes"] = cap
            if rec.get("profile_run"):
                rec["profile_run"] = os.path.relpath(rec["profile_run"], logdir).replace(os.sep, "/")
            appender.write(rec)
            new[cell_key(rec)] = rec
            result.measured += 1
            if tb is not None:
                tb.cell(rec)
            detail = duration_text(rec['median_s'] * 1e6) if rec["status"] == "ok" else (rec.get("reason") or "")[:60]
            bar.finish(what, rec["status"], detail)
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        bar.close()
        appender.close()
        if worker is not None:
            worker.close()
        if cap is not None and device == "cuda":  # a Python caller's process goes on with the fraction it had
            from .limits import restore_cuda_cap

            restore_cuda_cap(cuda_cap_before)
    done.update(new)
    order = {cell_key(c.key()): i for i, c in enumerate(cells)}
    result.extend(sorted(done.values(), key=lambda r: order.get(cell_key(r), len(order))))
    in_grid = [r for r in result if cell_key(r) in order]
    if tb is not None:
        tb.close()
    if out is not None:
        print(compare_table(in_grid), file=out)
        numbers = metrics_table(in_grid)
        if numbers:
            print("\n" + numbers, file=out)
        print(f"\nFLOPs: {CONVENTION}. Times: median of torch.utils.benchmark blocked_autorange "
              f"(min_run_time {min_run_time} s) after {warmup} warm-up calls.", file=out)
        from .measure import PEAK_METHOD

        print(f"Peak memory: {PEAK_METHOD[device]}.", file=out)
        failed = [r for r in in_grid if r["status"] != "ok"]
        for r in failed:
            print(f"  {r['status']}: {r.get('module') or r['backend']} B={r['batch']} L={r['seq_len']}: "
                  f"{r.get('reason')}", file=out)
        print(analysis.render(in_grid), file=out)
        if result.interrupted:
            print(f"interrupted: {result.measured} new cell(s) kept in {store.path_in(logdir)}; "
                  "run the same command again to measure the rest", file=out)
    return result
