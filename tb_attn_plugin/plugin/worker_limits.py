"""Resource limits of an analysis worker, set before each task: address space and CPU time.

A hostile file that gets past the readers' own bounds must still not take the machine: a worker
may map at most TB_ATTN_WORKER_MEMORY (default: the machine's memory shared among the pool's
workers, at least 2 GiB; an allocation past it is a MemoryError, one line for that file, instead
of the kernel's OOM killer taking TensorBoard), and spend at most TB_ATTN_WORKER_CPU_S seconds of
CPU on one task (default 900, the /annotated timeout; then SIGXCPU ends the task with one line).
"""

from __future__ import annotations

import os
import re

MEMORY_ENV = "TB_ATTN_WORKER_MEMORY"  # bytes, or with K/M/G; 0: no limit
CPU_ENV = "TB_ATTN_WORKER_CPU_S"  # seconds of CPU per task; 0: no limit
DEFAULT_CPU_S = 900
MIN_MEMORY = 2 << 30
_SIZE = re.compile(r"^([0-9]{1,15})([KMG]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class CpuTimeExceeded(Exception):
    """The task used its CPU seconds (SIGXCPU)."""


def default_memory(workers: int) -> int | None:
    """The machine's memory shared among ``workers``, at least MIN_MEMORY; None when unknown."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return max(MIN_MEMORY, total // max(1, workers))


def parse_memory(raw: str | None) -> int | None:
    """Bytes from TB_ATTN_WORKER_MEMORY's value (None: no limit); ValueError when it is not a size."""
    raw = (raw or "").strip()
    if not raw or raw == "0":
        return None
    m = _SIZE.match(raw) if raw.isascii() else None
    if not m:
        raise ValueError(f"{MEMORY_ENV}={raw[:40]!r} is not a size (bytes, or a number with K, M or G)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_cpu(raw: str | None) -> int | None:
    raw = (raw or "").strip()
    if not raw:
        return DEFAULT_CPU_S
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise ValueError(f"{CPU_ENV}={raw[:40]!r} is not a whole number of seconds")
    return int(raw) or None


def _on_xcpu(signum, frame):
    raise CpuTimeExceeded()


def apply() -> str | None:
    """Set this worker's limits for the task about to run, from the environment the task brought
    (work._apply); the one-line error for a bad setting, else None. Only soft limits move: a hard
    limit once lowered could never be raised for the next task."""
    import multiprocessing
    import threading

    if multiprocessing.parent_process() is None:  # the plugin's own process (a test calling work directly)
        return None
    try:
        import resource
        import signal
    except ImportError:  # not on this platform
        return None
    try:
        memory = parse_memory(os.environ.get(MEMORY_ENV))
        cpu = parse_cpu(os.environ.get(CPU_ENV))
    except ValueError as exc:
        return str(exc)
    inf = resource.RLIM_INFINITY
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = hard if memory is None else memory if hard == inf else min(memory, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if threading.current_thread() is not threading.main_thread():
        cpu = None  # SIGXCPU's handler needs the main thread (a Dask worker's task thread has not)
    if cpu is None:
        soft = hard
    else:
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(used.ru_utime + used.ru_stime) + cpu + 1
        soft = soft if hard == inf else min(soft, hard)
    if cpu is not None:
        signal.signal(signal.SIGXCPU, _on_xcpu)  # the worker's main thread runs its tasks
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    return None


def describe_memory() -> str:
    limit = parse_memory(os.environ.get(MEMORY_ENV)) if os.environ.get(MEMORY_ENV) else None
    return f" (a worker may use {limit >> 20} MiB: {MEMORY_ENV})" if limit else ""
