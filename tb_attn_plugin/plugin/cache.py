"""Analysis results kept across TensorBoard restarts, outside the logdir.

One file per trace version: the key hashes the trace's path, size, mtime and the engine version,
so a changed trace or a new engine never reuses an old result, and nothing needs invalidating.
A file holds one header line (status, message, summary) and then the report's JSON bytes, so that
the index can learn a run's state by reading one line, and /report can send the bytes as they are.
Errors are cached too: a broken trace is not re-parsed on every restart.

The directory is ``$TB_ATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb-attn``, else ``~/.cache/tb-attn``.
When it cannot be written (read-only home, a locked-down container) everything stays in memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..version import ENGINE_VERSION

logger = logging.getLogger(__name__)

MEMORY_LRU_BYTES = 64 << 20  # report bytes kept in memory when they are also on disk


@dataclass
class Result:
    status: str  # "ready" | "error"
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    report: bytes | None = None  # the report JSON; None in a header-only read


def default_dir() -> str:
    d = os.environ.get("TB_ATTN_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb-attn")


def cache_key(path: str, size: int, mtime: float) -> str:
    text = "\0".join([ENGINE_VERSION, str(path), str(int(size)), repr(round(float(mtime), 6))])
    return hashlib.sha256(text.encode()).hexdigest()


class ReportCache:
    def __init__(self, directory: str | None = None):
        self.directory = self._usable(directory or default_dir())
        self._lock = threading.Lock()
        # Without a directory this is the only copy, so it is never evicted; with one it is an LRU.
        self._mem: OrderedDict[str, Result] = OrderedDict()
        self._mem_bytes = 0

    @property
    def on_disk(self) -> bool:
        return self.directory is not None

    @staticmethod
    def _usable(directory: str) -> str | None:
        try:
            d = os.path.join(directory, f"reports-v{ENGINE_VERSION}")
            os.makedirs(d, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
            os.close(fd)
            os.unlink(probe)
            return d
        except OSError as exc:
            logger.warning("tb-attn: cache directory %s is not writable (%s); keeping reports in memory only",
                           directory, exc)
            return None

    def _file(self, key: str) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, key[:2], key + ".json")

    def get(self, key: str, *, with_report: bool = True) -> Result | None:
        with self._lock:
            hit = self._mem.get(key)
            if hit is not None:
                self._mem.move_to_end(key)
                return hit
        if self.directory is None:
            return None
        try:
            with open(self._file(key), "rb") as fh:
                header = json.loads(fh.readline())
                body = fh.read() if with_report else None
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("tb-attn: ignoring unreadable cache entry %s: %s", key, exc)
            return None
        res = Result(header.get("status", "error"), header.get("message"), header.get("summary") or {}, body or None)
        if res.status == "ready" and with_report and not res.report:
            return None  # a cut-short entry: analyse again
        if with_report:
            self._remember(key, res)
        return res

    def put(self, key: str, res: Result) -> None:
        self._remember(key, res)
        if self.directory is None:
            return
        header = json.dumps({"status": res.status, "message": res.message, "summary": res.summary},
                            separators=(",", ":")).encode()
        path = self._file(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(header + b"\n" + (res.report or b""))
            os.replace(tmp, path)  # readers see the old entry or the whole new one, never half
        except OSError as exc:
            logger.warning("tb-attn: cannot write cache entry %s: %s", path, exc)

    def _remember(self, key: str, res: Result) -> None:
        with self._lock:
            old = self._mem.pop(key, None)
            if old is not None:
                self._mem_bytes -= len(old.report or b"")
            self._mem[key] = res
            self._mem_bytes += len(res.report or b"")
            if self.directory is None:
                return
            while self._mem_bytes > MEMORY_LRU_BYTES and len(self._mem) > 1:
                _, dropped = self._mem.popitem(last=False)
                self._mem_bytes -= len(dropped.report or b"")
