"""The state of every trace file under the logdir: loading, ready or error.

A background thread lists the logdir every reload interval, so new runs and new files written by
live training appear without a restart. A file is analysed only once its size and mtime have
stopped changing for ``settle_s`` seconds, so a trace still being written is shown as loading, never
half-read as final; if it changes after being analysed, it is analysed again. Results come from the
disk cache when possible, else from the analysis pool, a few files at a time so that a file the
user asks for can jump the queue. Request threads only read this state: they never list, parse or
wait.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec

from ..memory.joining import is_snapshot_path
from ..report.spans import pick_latest
from .cache import ReportCache, Result, cache_key
from .layout import MAX_SKIPPED, Found, Source
from .pool import AnalysisPool, Unavailable

logger = logging.getLogger(__name__)

LOADING, READY, ERROR = "loading", "ready", "error"
# what a route that needs a trace's report answers for a snapshot listed on its own (422)
NOT_A_TRACE = "{} is a CUDA memory snapshot, not a trace: it has a memory section only (the Memory view, /memory)"


def unreadable(display: str, exc: Exception) -> str:
    """The one line a route answers (422) for a cached report that does not decode as the format's report."""
    return f"{display}: its cached report cannot be read ({' '.join(str(exc).split())}); delete the cache entry to analyse it again"


MAX_ATTEMPTS = 2  # a worker dying twice on the same file marks the file, not the pool, as bad
IN_FLIGHT_PER_WORKER = 2


class UnknownName(LookupError):
    """A run, worker or span that the index does not know; str() is the message for the user."""


@dataclass(eq=False)
class Entry:
    run: str
    worker: str
    span: str
    path: str
    size: int
    mtime: float
    changed_at: float
    joins: tuple[tuple[str, int, float], ...] = ()  # the snapshots joining its report (layout.Found)
    named: str = ""  # how a file whose name lacks {worker}.{span} was named (layout.Found.named)
    status: str = LOADING
    phase: str = "waiting"  # waiting (settling) | checking (cache) | queued | running | done
    key: str | None = None  # cache key of the version being analysed or shown
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0
    wanted: bool = False  # someone asked for it: analyse it next

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.run, self.worker, self.span)

    @property
    def is_snapshot(self) -> bool:
        """A memory snapshot listed on its own: it has a memory section, not a trace's report."""
        return is_snapshot_path(self.path)

    @property
    def snapshot_paths(self) -> list[str]:
        d = os.path.dirname(self.path)
        return [os.path.join(d, name) for name, _, _ in self.joins]

    @property
    def display(self) -> str:
        """The file as the user knows it: relative to the logdir, never the absolute path."""
        name = self.path.replace("\\", "/").rsplit("/", 1)[-1]
        return name if self.run == "." else f"{self.run}/{name}"


def span_key(span: str):
    return (0, int(span), "") if span.isdigit() else (1, 0, span)


def _known_empty(e: "Entry") -> bool:
    """Analysed and found to hold no step and no attention (report.spans.is_empty)."""
    return e.status == READY and bool(e.summary.get("empty"))


def default_entry(entries: list["Entry"]) -> "Entry":
    """A worker's span shown by default: the latest one that is not known to be empty."""
    return pick_latest(sorted(entries, key=lambda e: span_key(e.span)), _known_empty)


class RunIndex:
    def __init__(self, logdir: str | Source, cache: ReportCache, pool: AnalysisPool, *, settle_s: float = 2.0,
                 interval_s: float | None = 5.0, clock: Callable[[], float] = time.time):
        self.source = logdir if isinstance(logdir, Source) else Source.from_logdir(logdir)
        self.logdir = self.source.text  # for messages
        self.cache = cache
        self.pool = pool
        self.settle_s = settle_s
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.RLock()
        self._entries: dict[tuple[str, str, str], Entry] = {}
        self._version = 0
        self._runs_bytes: tuple[int, bytes] | None = None
        self._scanned = threading.Event()
        self._scan_error: str | None = None
        self._skipped: list[dict[str, str]] = []  # files that look like traces but are not listed, and why
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="tb-attn-index", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self.pool.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except Exception:  # never let the thread die: the next pass may well succeed
                logger.exception("tb-attn: scanning %s failed", self.logdir)
            if self.interval_s is None:
                # Reloading is off: scan again only while files are still settling.
                with self._lock:
                    if not any(e.phase == "waiting" for e in self._entries.values()):
                        return
                self._stop.wait(self.settle_s)
            else:
                self._stop.wait(self.interval_s)

    # -- scanning ----------------------------------------------------------------------------

    def scan(self) -> None:
        try:
            found, error = self.source.list(), None
        except Exception as exc:  # keep showing what was found before; say why it is stale
            found, error = None, f"cannot list the logdir {self.logdir}: {type(exc).__name__}: {exc}"
            logger.warning("tb-attn: %s", error)
        with self._lock:
            if error != self._scan_error:
                self._scan_error = error
                self._version += 1
            skipped = getattr(found, "skipped", None)
            if skipped is not None and skipped != self._skipped:
                self._skipped = list(skipped)
                self._version += 1
        if found is not None:
            self._merge(found)
        self._scanned.set()
        self._schedule()

    def _merge(self, found: list[Found]) -> None:
        now = self.clock()
        with self._lock:
            seen = set()
            changed = False
            for f in found:
                ident = (f.run, f.worker, f.span)
                seen.add(ident)
                e = self._entries.get(ident)
                if e is None:
                    # A file already old when first seen is settled at once; a fresh one waits.
                    since = min(f.mtime, now) if f.mtime else now
                    self._entries[ident] = Entry(f.run, f.worker, f.span, f.path, f.size, f.mtime, since, f.joins,
                                                 named=f.named)
                    changed = True
                elif (e.path, e.size, e.mtime, e.joins) != (f.path, f.size, f.mtime, f.joins):
                    # Grown or rewritten (live training), or a snapshot joining it came, changed or
                    # went: back to loading, analysed once it settles. An analysis still running
                    # for the old version is dropped when it returns.
                    e.path, e.size, e.mtime, e.joins, e.changed_at = f.path, f.size, f.mtime, f.joins, now
                    e.status, e.phase, e.key, e.message, e.summary, e.attempts = LOADING, "waiting", None, None, {}, 0
                    changed = True
                if e is not None and e.named != f.named:
                    e.named, changed = f.named, True
            for ident in [i for i in self._entries if i not in seen]:
                del self._entries[ident]
                changed = True
            if changed:
                self._version += 1

    def _schedule(self) -> None:
        now = self.clock()
        patterns = self._patterns()  # read outside the lock
        settled = []
        with self._lock:
            for e in self._entries.values():
                if e.phase == "waiting" and now - e.changed_at >= self.settle_s:
                    e.phase, e.key = "checking", cache_key(e.path, e.size, e.mtime, patterns, e.joins)
                    settled.append((e, e.key))
        for e, key in settled:  # cache reads outside the lock: requests never wait on disk
            hit = self.cache.get(key, with_report=False)
            with self._lock:
                if e.key == key and e.phase == "checking":
                    if hit is not None:
                        self._apply(e, hit)
                    else:
                        e.phase = "queued"
        self._dispatch()

    def _dispatch(self) -> None:
        """Keep two files per worker in flight: one running, one ready to start the moment the
        other's result is handed back (small runs are mostly hand-off), and still few enough that
        a file someone asks for starts soon."""
        started: list[tuple[Entry, str, Future, object]] = []
        with self._lock:
            if self._stop.is_set():
                return
            running = sum(1 for e in self._entries.values() if e.phase == "running")
            free = IN_FLIGHT_PER_WORKER * self.pool.workers - running
            if free <= 0:
                return
            queued = [e for e in self._entries.values() if e.phase == "queued"]
            latest: dict[tuple[str, str], str] = {}
            for x in self._entries.values():
                k = (x.run, x.worker)
                if k not in latest or span_key(x.span) > span_key(latest[k]):
                    latest[k] = x.span
            # Asked-for files first, then the latest span of each worker (what users open first).
            queued.sort(key=lambda e: (not e.wanted, e.span != latest[(e.run, e.worker)], e.run, e.worker,
                                       span_key(e.span)))
            for e in queued[:free]:
                try:
                    fut, executor = self.pool.submit(e.path, e.display, e.snapshot_paths)
                except Exception as exc:  # pool closed, or processes cannot be started here
                    self._apply(e, _cannot_start(e, exc))
                    continue
                e.phase = "running"
                started.append((e, e.key, fut, executor))
        for e, key, fut, executor in started:
            fut.add_done_callback(lambda f, e=e, key=key, ex=executor: self._done(e, key, f, ex))

    def _done(self, e: Entry, key: str, fut: Future, executor) -> None:
        try:
            status, message, summary, body = fut.result()
            res = Result(status, message, summary, body)
        except CancelledError:
            return  # closing
        except BrokenProcessPool:
            # A worker died (killed for memory, crashed): start a new pool, retry once, then give up.
            self.pool.reset(executor)
            with self._lock:
                if e.key == key and e.phase == "running":
                    e.attempts += 1
                    if e.attempts >= MAX_ATTEMPTS:
                        self._apply(e, Result(ERROR, f"{e.display}: the analysis process died while reading "
                                                     "this trace (out of memory?)"))
                    else:
                        e.phase = "queued"
            self._dispatch()
            return
        except Unavailable as exc:  # the pool could not start it (a Dask scheduler out of reach): not cached
            with self._lock:
                if e.key == key and e.phase == "running":
                    self._apply(e, _cannot_start(e, exc))
            self._dispatch()
            return
        except Exception as exc:
            res = Result(ERROR, f"{e.display}: analysis failed: {type(exc).__name__}: {exc}")
        with self._lock:
            current = e.key == key and e.phase == "running"
        if current:
            self.cache.put(key, res)
            with self._lock:
                if e.key == key and e.phase == "running":
                    self._apply(e, Result(res.status, res.message, res.summary))
        self._dispatch()

    def _apply(self, e: Entry, res: Result) -> None:
        e.status, e.message, e.summary, e.phase = res.status, res.message, res.summary, "done"
        self._version += 1

    # -- reading (request threads) -----------------------------------------------------------

    def has_traces(self) -> bool:
        with self._lock:
            return bool(self._entries)

    def wait_scanned(self, timeout: float) -> bool:
        return self._scanned.wait(timeout)

    def run_names(self) -> list[str]:
        with self._lock:
            return sorted({e.run for e in self._entries.values()})

    def _patterns(self) -> str:
        """What decides a report besides the file and the engine, as the pool saw it: the pattern
        files the workers load (TB_ATTN_PATTERNS) and the size limits they apply."""
        from ..attention.user_table import env_paths, fingerprint

        parts = (fingerprint(env_paths(getattr(self.pool, "patterns", ""))), getattr(self.pool, "limits", ""))
        return "\0".join(p for p in parts if p)

    def lookup(self, run: str, worker: str | None = None, span: str | None = None) -> Entry:
        """The entry a request names; worker defaults to the first, span to the latest not empty one."""
        with self._lock:
            in_run = [e for e in self._entries.values() if e.run == run]
            if not in_run:
                raise UnknownName(f"no run named {_quote(run)}" + _known(sorted({e.run for e in self._entries.values()})))
            workers = sorted({e.worker for e in in_run})
            if worker is None:
                worker = workers[0]
            in_worker = [e for e in in_run if e.worker == worker]
            if not in_worker:
                raise UnknownName(f"run {_quote(run)} has no worker {_quote(worker)}" + _known(workers, "workers"))
            spans = sorted((e.span for e in in_worker), key=span_key)
            if span is None:
                return default_entry(in_worker)
            for e in in_worker:
                if e.span == span:
                    return e
            raise UnknownName(f"worker {_quote(worker)} of run {_quote(run)} has no span {_quote(span)}"
                              + _known(spans, "spans"))

    def latest_entries(self, run: str) -> list[Entry]:
        """Each worker's default span in ``run`` (the latest not empty), by worker name (the ranks of a job, for /ranks)."""
        with self._lock:
            in_run = [e for e in self._entries.values() if e.run == run]
            if not in_run:
                raise UnknownName(f"no run named {_quote(run)}" + _known(sorted({e.run for e in self._entries.values()})))
            by_worker: dict[str, list[Entry]] = {}
            for e in in_run:
                by_worker.setdefault(e.worker, []).append(e)
            return [default_entry(by_worker[w]) for w in sorted(by_worker)]

    def want(self, e: Entry) -> None:
        """Someone is waiting for this file: let it jump the queue."""
        with self._lock:
            e.wanted = True
        self._dispatch()

    def report_bytes(self, e: Entry) -> bytes | None:
        """The report of a ready entry, or None when it is gone from the cache (then re-queued)."""
        key = e.key
        if key is None:
            return None
        hit = self.cache.get(key)
        if hit is not None and hit.report:
            return hit.report
        with self._lock:  # the cache entry was deleted under us: analyse again
            if e.key == key and e.phase == "done":
                e.status, e.phase, e.wanted = LOADING, "queued", True
                self._version += 1
        self._dispatch()
        return None

    def runs_json(self) -> bytes:
        """The /runs document, rebuilt only when something changed since the last request."""
        with self._lock:
            if self._runs_bytes is not None and self._runs_bytes[0] == self._version:
                return self._runs_bytes[1]
            version = self._version
            doc = self._runs_doc()
        body = msgspec.json.encode(doc)
        with self._lock:
            self._runs_bytes = (version, body)
        return body

    def _runs_doc(self) -> dict[str, Any]:
        by_run: dict[str, dict[str, list[Entry]]] = {}
        for e in self._entries.values():
            by_run.setdefault(e.run, {}).setdefault(e.worker, []).append(e)
        runs = []
        for run in sorted(by_run):
            workers = []
            statuses = set()
            for worker in sorted(by_run[run]):
                spans = []
                for e in sorted(by_run[run][worker], key=lambda e: span_key(e.span)):
                    s: dict[str, Any] = {"span": e.span, "status": e.status, "size_bytes": e.size, "file": e.display}
                    if e.named:
                        s["named"] = e.named
                    if e.status == ERROR:
                        s["message"] = e.message
                    elif e.status == LOADING:
                        s["phase"] = e.phase
                    else:
                        s["summary"] = e.summary
                    statuses.add(e.status)
                    spans.append(s)
                workers.append({"worker": worker, "spans": spans,
                                "default_span": default_entry(by_run[run][worker]).span})
            first = sorted(by_run[run])[0]
            default = default_entry(by_run[run][first])
            status = LOADING if LOADING in statuses else (READY if READY in statuses else ERROR)
            runs.append({"run": run, "status": status, "workers": workers,
                         "metadata": default.summary.get("metadata", {}) if default.status == READY else {}})
        doc: dict[str, Any] = {"runs": runs, "scanned": self._scanned.is_set()}
        if self._scan_error:
            doc["error"] = self._scan_error
        if self._skipped:
            doc["skipped"] = self._skipped[:MAX_SKIPPED]
            doc["skipped_count"] = len(self._skipped)
        return doc


def _cannot_start(e: Entry, exc: Exception) -> Result:
    """The error shown when the pool could not run a file's analysis (never cached: it is not the file's)."""
    return Result(ERROR, f"{e.display}: cannot start an analysis process: {exc}")


def _quote(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:80] + "...")


def _known(names: list[str], what: str = "runs") -> str:
    if not names:
        return f" (no {what} found yet)"
    shown = ", ".join(_quote(n) for n in names[:20])
    more = f" and {len(names) - 20} more" if len(names) > 20 else ""
    return f" (known {what}: {shown}{more})"
