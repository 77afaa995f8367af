"""``--memory-cap``: a real limit, so that an out-of-memory is a failed allocation, never a guess.

CUDA: torch.cuda.set_per_process_memory_fraction, so the caching allocator refuses beyond the cap.
CPU: each cell runs in one long-lived child process whose address space (RLIMIT_AS) is capped at
what it has mapped before the cell plus the cap; an allocation beyond it fails inside torch
(``DefaultCPUAllocator: can't allocate memory``) and the cell is recorded as ``oom``. The limit is
lifted after each cell, so the child goes on with the next one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import signal
from typing import Any

from .grid import Cell, GridError


def apply_cuda_cap(cap_bytes: int) -> float | None:
    """Caps the current GPU; returns the fraction in force before (None where torch cannot say),
    for restore_cuda_cap after the sweep: the fraction is the whole process's, not the sweep's."""
    import torch

    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before = getter() if getter is not None else None
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total))
    return before


def restore_cuda_cap(before: float | None) -> None:
    import torch

    torch.cuda.set_per_process_memory_fraction(1.0 if before is None else before)


def _mapped_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise OSError("/proc/self/status has no VmSize")


class _Capped:
    """RLIMIT_AS lowered for the duration of a block, then restored."""

    def __init__(self, cap_bytes: int):
        self.cap = cap_bytes

    def __enter__(self):
        self.saved = resource.getrlimit(resource.RLIMIT_AS)
        hard = self.saved[1]
        soft = _mapped_bytes() + self.cap
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        return self

    def __exit__(self, *exc):
        resource.setrlimit(resource.RLIMIT_AS, self.saved)
        return False


def _child(conn, cap_bytes: int, num_threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import torch

    from .measure import quiet_stderr, run_cell

    torch.set_num_threads(num_threads)
    # Start the intra-op threads and the profiler (their stacks and buffers are mappings too) before
    # any limit is in place: the limit is for the cell's tensors.
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(256, 256)
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        (a @ a).softmax(-1).sum().item()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        cell_key, kwargs = msg
        cell = Cell.from_key(cell_key)
        try:
            with _Capped(cap_bytes):
                rec = run_cell(cell, **kwargs)
        except GridError as e:  # a mistake in the user's --module: the parent reports it and stops
            conn.send(("grid", str(e)))
            continue
        except Exception as e:
            conn.send(("raise", f"{type(e).__name__}: {e}"))
            continue
        conn.send(("ok", rec))


class CappedWorker:
    """The child process that runs CPU cells under the cap (spawned: a fork of a process that has
    started torch's thread pools is not safe)."""

    def __init__(self, cap_bytes: int):
        import torch

        if not os.path.exists("/proc/self/status"):
            raise OSError("--memory-cap on the CPU needs Linux (/proc and RLIMIT_AS)")
        ctx = mp.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child_conn, cap_bytes, torch.get_num_threads()),
                                 name="tb-attn-sweep-capped", daemon=True)
        self._proc.start()
        child_conn.close()

    def run(self, cell: Cell, **kwargs: Any) -> dict[str, Any]:
        self._conn.send((cell.key(), kwargs))
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            code = self._proc.exitcode
            raise RuntimeError(f"the capped child process died (exit code {code}) "
                               f"while measuring {cell.cell_id}") from None
        if kind == "grid":
            raise GridError(payload)
        if kind == "raise":
            raise RuntimeError(payload)
        return payload

    def close(self) -> None:
        try:
            if self._proc.is_alive():
                self._conn.send(None)
                self._proc.join(5)
        except (OSError, BrokenPipeError):
            pass
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)
        self._conn.close()
