"""The /annotated route: a run's trace with tb-attn's analysis on its own track, streamed as a download.

The copy is written by a worker process (work.annotate) into a private temporary directory, never
into the logdir, sent in chunks, and deleted once the response is closed. At most
TB_ATTN_ANNOTATE_QUEUE copies are being made at once (a request beyond that is answered 503 with
Retry-After, so requests never pile up behind busy workers, each holding a thread and a directory);
every copy lives under one directory of this process, removed at exit (TensorBoard's SIGTERM runs
atexit) and, after a crash or SIGKILL, by the next process that makes a copy.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading

from werkzeug import wrappers
from werkzeug.wsgi import ClosingIterator, wrap_file

from . import work

TIMEOUT_S = 900.0
QUEUE_ENV = "TB_ATTN_ANNOTATE_QUEUE"  # copies being made at once; default twice the workers
RETRY_AFTER_S = 30
PREFIX = "tb-attn-annotated-"  # then this process's id: tb-attn-annotated-<pid>-<random>
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_OWN = re.compile(re.escape(PREFIX) + r"(\d+)-")

_lock = threading.Lock()
_root: str | None = None  # this process's directory of copies


def download_name(display: str) -> str:
    base = os.path.basename(display.replace("\\", "/")) or "trace"
    for suffix in (".json.gz", ".json"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return (_UNSAFE.sub("_", base).strip("._") or "trace")[:150] + ".tb-attn.json.gz"


def queue_size(pool) -> int:
    raw = os.environ.get(QUEUE_ENV, "").strip()
    if raw.isascii() and raw.isdigit() and 0 < int(raw) < 10_000:
        return int(raw)
    return 2 * max(1, int(getattr(pool, "workers", 1) or 1))


def _slots_for(pool) -> tuple[threading.BoundedSemaphore, int]:
    """The pool's slots for copies (one set per pool: per plugin instance)."""
    with _lock:
        got = getattr(pool, "_annotate_slots", None)
        if got is None:
            size = queue_size(pool)
            got = (threading.BoundedSemaphore(size), size)
            pool._annotate_slots = got
        return got


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _remove_stale(tmp: str) -> None:
    """Directories of copies left by processes that are gone (killed before their atexit ran)."""
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for name in names:
        m = _OWN.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _remove_root() -> None:
    global _root
    with _lock:
        root, _root = _root, None
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def own_root() -> str:
    """This process's directory of copies, made on first use (stale ones of dead processes removed)."""
    global _root
    with _lock:
        if _root is None or not os.path.isdir(_root):
            tmp = tempfile.gettempdir()
            _remove_stale(tmp)
            first = _root is None
            _root = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=tmp)
            if first:
                atexit.register(_remove_root)
        return _root


def respond(request, entry, pool, error):
    """``error(code, message[, headers])`` builds the plugin's ApiError."""
    slots, size = _slots_for(pool)
    if not slots.acquire(blocking=False):
        raise error(503, f"{entry.display}: {size} annotated copies are being made already; "
                         f"try again in {RETRY_AFTER_S} s", {"Retry-After": str(RETRY_AFTER_S)})
    tmpdir = None
    handed = False  # the response's close removes the directory
    try:
        tmpdir = tempfile.mkdtemp(dir=own_root())
        out = os.path.join(tmpdir, "annotated.json.gz")
        fut = pool.call(work.annotate, entry.path, out)
        try:
            status, message = fut.result(timeout=TIMEOUT_S)
        except Exception as exc:
            fut.cancel()
            raise error(503, f"{entry.display}: cannot annotate now ({type(exc).__name__}); try again",
                        {"Retry-After": str(RETRY_AFTER_S)}) from None
        finally:
            slots.release()  # the worker is done with it: the next request may queue
        if status != "ready":
            raise error(422, f"{entry.display}: {message}")
        fh = open(out, "rb")
        size_b = os.fstat(fh.fileno()).st_size
        done = tmpdir

        def cleanup():
            fh.close()
            shutil.rmtree(done, ignore_errors=True)

        # The server closes the iterable it is given: with direct_passthrough that is this one (a
        # Response's own call_on_close would never run, and every download left its directory).
        body = ClosingIterator(wrap_file(request.environ, fh, buffer_size=1 << 20), [cleanup])
        handed = True
        resp = wrappers.Response(body, mimetype="application/gzip", direct_passthrough=True)
        resp.headers["Content-Length"] = str(size_b)
        resp.headers["Content-Disposition"] = f'attachment; filename="{download_name(entry.display)}"'
        resp.headers["X-Content-Type-Options"] = "nosniff"  # as http_util.Respond sets on every other answer
        return resp
    finally:
        if not handed and tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
