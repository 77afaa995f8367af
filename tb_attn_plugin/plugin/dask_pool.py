"""The analysis pool on a Dask cluster, used instead of the local processes when
TB_ATTN_DASK_SCHEDULER is set (an address such as tcp://scheduler:8786, or "local").

It answers the index as AnalysisPool does (submit -> a concurrent Future of work.analyze's result),
so the index, the cache and the routes do not know where a trace was analysed. Workers read the
trace themselves, by the path or URL the index found, so the logdir must be visible to them (a
shared file system, or an object store URL); only the compact report comes back. A worker lost
mid-task is not this class's business: the scheduler runs the task again on another worker.

Each task carries this plugin's TB_ATTN_PATTERNS and size limits (pool.ENGINE_ENV, as the local
pool's do; the pattern files must be readable by the workers, like the logdir), and they are part of
the cache key. An annotated copy (/annotated) is written here, by one local worker process, since
the download is served from this machine's disk.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future

from ..cluster import dask_jobs
from . import work
from .pool import ENGINE_ENV, LIMIT_ENV, AnalysisPool, Unavailable

logger = logging.getLogger(__name__)
ENV = "TB_ATTN_DASK_SCHEDULER"
DEFAULT_SLOTS = 4  # in-flight tasks before the cluster has told how many threads it has
# After a failed connection, the files submitted within this many seconds fail at once with the same
# cause instead of each waiting for its own connection timeout (the index submits under its lock:
# 1,024 ranks x 20 s would hang TensorBoard for hours).
RETRY_AFTER_S = 60.0


class DaskAnalysisPool:
    def __init__(self, address: str):
        self.address = address
        self._lock = threading.Lock()
        self._client = None
        self._slots = DEFAULT_SLOTS
        self._closed = False
        self._env = {k: os.environ.get(k) for k in ENGINE_ENV}  # None: unset on the worker too
        # The local pool that writes annotated copies (its process starts on first use); made now so
        # that it carries this moment's environment, as the tasks do.
        self._local = AnalysisPool(workers=1)
        self._failed: tuple[float, str] | None = None  # (when, why) of the last failed connection
        self._connecting: threading.Thread | None = None
        self._waiting: list[tuple[Future, tuple]] = []  # submitted while connecting

    @property
    def patterns(self) -> str:
        """TB_ATTN_PATTERNS as the workers get it (part of the cache key)."""
        return self._env.get("TB_ATTN_PATTERNS") or ""

    @property
    def limits(self) -> str:
        """The size limits the workers apply, set ones only (part of the cache key)."""
        return ";".join(f"{k}={self._env[k]}" for k in LIMIT_ENV if self._env.get(k) is not None)

    def call(self, fn, *args) -> Future:
        """Run ``fn(*args, env)`` in a local worker process: its output file must be on this machine."""
        with self._lock:
            if self._closed:
                raise RuntimeError("analysis pool is closed")
            local = self._local
        return local.call(fn, *args)

    @property
    def workers(self) -> int:
        """Threads across the cluster's workers (the index keeps about two tasks per slot in flight)."""
        return self._slots

    def submit(self, path: str, display_name: str, snapshots: list[str] | None = None
               ) -> tuple[Future, "DaskAnalysisPool"]:
        """A future of work.analyze's result. Never waits for the scheduler: the index calls this
        under its lock, and a connection can take CONNECT_TIMEOUT, so connecting happens on a thread
        of its own and the files submitted meanwhile are started (or failed) when it ends."""
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        with self._lock:
            if self._closed:
                raise RuntimeError("analysis pool is closed")
            client = self._client
            if client is None:
                if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_AFTER_S:
                    raise Unavailable(self._failed[1])
                self._waiting.append((fut, (path, display_name, snapshots)))
                if self._connecting is None:
                    self._connecting = threading.Thread(target=self._connect, name="tb-attn-dask-connect",
                                                        daemon=True)
                    self._connecting.start()
                return fut, self
        self._start(client, fut, path, display_name, snapshots)
        return fut, self

    def _connect(self) -> None:
        client, why = None, None
        try:
            client = dask_jobs.connect(self.address)
        except dask_jobs.DaskUnavailable as exc:
            why = f"{ENV}={self.address}: {exc}".replace("--dask needs", "it needs")
        except Exception as exc:  # anything else the client raises: the same kind of answer
            why = f"{ENV}={self.address}: cannot connect: {type(exc).__name__}: {exc}"
        stale = None
        with self._lock:
            self._connecting = None
            waiting, self._waiting = self._waiting, []
            if client is not None and self._closed:
                why, stale, client = "analysis pool is closed", client, None
            elif client is not None:
                self._client, self._failed = client, None
                self._slots = max(1, sum(client.nthreads().values()) or DEFAULT_SLOTS)
                logger.info("tb-attn: analysing traces on the Dask cluster at %s (%d threads)", self.address,
                            self._slots)
            else:
                self._failed = (time.monotonic(), why)
                logger.error("tb-attn: %s", why)
        if stale is not None:
            dask_jobs.close(stale)
        for fut, args in waiting:
            if client is None:
                fut.set_exception(Unavailable(why))
            else:
                self._start(client, fut, *args)

    def _start(self, client, fut: Future, path: str, display_name: str, snapshots: list[str] | None) -> None:
        dfut = client.submit(work.analyze, path, display_name, self._env, snapshots, pure=False)
        fut.dask_future = dfut  # Dask forgets a task whose future is no longer referenced

        def done(df) -> None:
            try:
                fut.set_result(df.result())
            except BaseException as exc:  # the task failed on every worker that tried (KilledWorker), or cancelled
                fut.set_exception(exc)

        dfut.add_done_callback(done)

    def reset(self, broken=None) -> None:
        """Nothing to rebuild: the scheduler replaces lost workers and reruns their tasks."""

    @property
    def executor(self):
        return self._client

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            local, self._local = self._local, None
        if local is not None:
            local.close()
        if client is not None:
            try:
                dask_jobs.close(client)
            except Exception:  # closing while the scheduler is already gone
                logger.debug("tb-attn: closing the Dask client failed", exc_info=True)
