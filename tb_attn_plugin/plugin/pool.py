"""A small, bounded pool of analysis processes.

Parsing a trace takes a few times the trace's size in memory and seconds of CPU. Doing it in
worker processes keeps TensorBoard's own memory flat (it only receives compact reports) and its
request threads free. The pool is created on first use, so a logdir without traces costs nothing,
and rebuilt if a worker dies (killed for memory, crashed), so one bad trace never stops the rest.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import threading
import weakref
from concurrent.futures import Future, ProcessPoolExecutor

from . import work, worker_limits
from .worker_limits import default_memory

logger = logging.getLogger(__name__)
TASKS_PER_WORKER = 4


def default_workers() -> int:
    try:
        n = int(os.environ.get("TB_ATTN_WORKERS", ""))
    except ValueError:
        n = 0
    return max(1, n) if n else max(1, min(2, os.cpu_count() or 1))


# Workers fork from a server started once per Python process, which keeps the environment of that
# moment (another plugin instance's, in a notebook or a test session). Each task therefore carries
# the settings that change what a worker reads or refuses, as this plugin was configured.
REMOTE_ENV_PREFIXES = ("AWS_", "FSSPEC_", "GOOGLE_", "GCSFS_", "AZURE_", "S3_")  # object stores
PROXY_ENV = {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}
# The size limits (trace/limits.py, memory/safe_pickle.py) and the user's kernel families (attention/user_table.py).
LIMIT_ENV = ("TB_ATTN_MAX_TRACE_BYTES", "TB_ATTN_MAX_SNAPSHOT_MB")
ENGINE_ENV = ("TB_ATTN_PATTERNS", *LIMIT_ENV)


def remote_env() -> dict[str, str | None]:
    """What each task sets in its worker; None: unset there (a reused worker must not keep another's)."""
    env: dict[str, str | None] = {k: v for k, v in os.environ.items()
                                  if k.startswith(REMOTE_ENV_PREFIXES) or k in PROXY_ENV}
    env.update({k: os.environ.get(k) for k in ENGINE_ENV})
    return env


def _context():
    # Never fork: TensorBoard runs threads (and maybe a data server), and a forked copy of a
    # threaded process can deadlock. forkserver starts each worker from a small clean process
    # that imports only the worker module, not TensorBoard.
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # Workers fork from a server that already imported the engine, and the main module (which
        # every non-fork child must import once): each worker then starts in milliseconds.
        ctx.set_forkserver_preload(["__main__", work.__name__, "tb_attn_plugin.report.build"])
        return ctx
    return multiprocessing.get_context("spawn")


def _new_executor(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=work.die_with_parent,
                               initargs=(os.getpid(),))


def _stop(ex: ProcessPoolExecutor) -> None:
    """Shut the executor down and stop its worker processes now, busy or not: a worker deep in a
    hostile file would otherwise run on (and hold the interpreter's exit) until its task ends."""
    procs = list((getattr(ex, "_processes", None) or {}).values())  # shutdown forgets them
    ex.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        try:
            if proc.is_alive():
                proc.terminate()
        except Exception:  # already reaped
            pass


_live: "weakref.WeakSet[AnalysisPool]" = weakref.WeakSet()


def _stop_all() -> None:
    for pool in list(_live):
        pool.close()


# Run at interpreter exit before concurrent.futures joins its executors (which waits for every
# running task: a SIGINT or TensorBoard's SIGTERM would wait out a busy worker); atexit runs later.
getattr(threading, "_register_atexit", atexit.register)(_stop_all)


class Unavailable(RuntimeError):
    """The pool cannot run analyses now (a Dask scheduler that cannot be reached); str() says why."""


class AnalysisPool:
    """Hands trace files to worker processes.

    A worker that parsed a large trace keeps its peak memory (the allocator rarely returns it), so
    the pool replaces its processes after TASKS_PER_WORKER files per worker. It does this itself,
    and only while idle, rather than with ProcessPoolExecutor's max_tasks_per_child: that option
    deadlocks on Python 3.11-3.13 once a worker retires with tasks still queued (CPython
    gh-115634), and retiring while busy would run old and new workers at once (twice the memory).
    Workers fork from the preloaded server, so a fresh set costs milliseconds.
    """

    def __init__(self, workers: int | None = None):
        self.workers = workers or default_workers()
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._submitted = 0  # files given to the current executor
        self._pending = 0  # of those, not finished yet
        self._closed = False
        self._env = remote_env()
        # Each worker's limits (worker_limits.py): the machine's memory shared among this pool's workers.
        mem = os.environ.get(worker_limits.MEMORY_ENV) or default_memory(self.workers)
        self._env[worker_limits.MEMORY_ENV] = str(mem) if mem else None
        self._env[worker_limits.CPU_ENV] = os.environ.get(worker_limits.CPU_ENV)
        self._worker_given = [k for k in (worker_limits.MEMORY_ENV, worker_limits.CPU_ENV) if os.environ.get(k)]
        _live.add(self)

    def submit(self, path: str, display_name: str, snapshots: list[str] | None = None
               ) -> tuple[Future, ProcessPoolExecutor]:
        """Start analysing one file; returns its future and the executor that runs it (what
        reset() takes when that executor turns out broken)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("analysis pool is closed")
            if self._executor is not None and self._pending == 0 \
                    and self._submitted >= TASKS_PER_WORKER * self.workers:
                self._executor.shutdown(wait=False)
                self._executor = None
            if self._executor is None:
                self._executor = _new_executor(self.workers)
                self._submitted = self._pending = 0
            ex = self._executor
            fut = ex.submit(work.analyze, path, display_name, self._env, snapshots)
            self._submitted += 1
            self._pending += 1
        fut.add_done_callback(lambda _f, ex=ex: self._finished(ex))
        return fut, ex

    def _finished(self, ex: ProcessPoolExecutor) -> None:
        with self._lock:
            if ex is self._executor:
                self._pending -= 1

    def reset(self, broken: ProcessPoolExecutor | None = None) -> None:
        """Drop a broken executor (a worker died); the next submit starts a fresh one."""
        with self._lock:
            ex = self._executor
            if ex is not None and (broken is None or ex is broken):
                self._executor = None
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)

    @property
    def patterns(self) -> str:
        """TB_ATTN_PATTERNS as the workers get it."""
        return self._env.get("TB_ATTN_PATTERNS") or ""

    @property
    def limits(self) -> str:
        """The size limits the workers apply, set ones only: part of the cache key, since a file
        refused under one limit may be read under another."""
        given = [k for k in LIMIT_ENV if self._env.get(k) is not None]
        # a worker's limits when the user set them (a file refused at one may be read at another)
        given += self._worker_given
        return ";".join(f"{k}={self._env[k]}" for k in given)

    def call(self, fn, *args) -> Future:
        """Run ``fn(*args, env)`` in a worker (fn: a function of work.py), e.g. work.annotate."""
        with self._lock:
            if self._closed:
                raise RuntimeError("analysis pool is closed")
            if self._executor is None:
                self._executor = _new_executor(self.workers)
                self._submitted = self._pending = 0
            return self._executor.submit(fn, *args, self._env)

    @property
    def executor(self) -> ProcessPoolExecutor | None:
        return self._executor

    def close(self) -> None:
        """Stop: queued tasks cancelled, worker processes terminated (busy ones too)."""
        with self._lock:
            self._closed = True
            ex, self._executor = self._executor, None
        if ex is not None:
            _stop(ex)
