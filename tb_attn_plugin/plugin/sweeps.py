"""Sweep runs for the Attention tab: directories holding a ``sweep.jsonl`` (``tb-attn sweep``), listed
in the background like trace runs, read on request with a size limit and cached until they change."""

from __future__ import annotations

import logging
import math
import os
import posixpath
import re
import threading
from dataclasses import dataclass
from typing import Any

from ..sweeps import analysis, conventions, store
from ..trace.read import is_url
from ..trace.url_logdir import mtime_of as _mtime
from .layout import Source, walk_local

logger = logging.getLogger(__name__)
_PROFILE_RUN = re.compile(r"profiles/[A-Za-z0-9_.+-]{1,120}")
# The fields the view reads, with their types; anything else in a line (per-run times, fields of a
# newer version, junk) stays in the file, and a field of the wrong type is served as null.
_TEXT = ("backend", "module", "dtype", "pass", "device", "device_name", "torch_version", "status", "reason", "cell_id",
         "profile_run")
_NUMBER = ("batch", "seq_len", "heads", "kv_heads", "head_dim", "median_s", "iqr_s", "mean_s", "peak_bytes", "flops",
           "tflops", "tokens_per_s", "pct_of_peak", "max_abs_error", "memory_cap_bytes", "number_per_run",
           "num_threads", "wall_time")
MAX_TEXT = 2000
MAX_NOTES = 20  # of the skipped lines' notes served; skipped_lines counts them all


def _finite_number(v: Any) -> bool:
    """A float that is finite, or an int a browser's JSON.parse reads exactly (|v| < 2^53)."""
    if isinstance(v, bool):
        return False
    return (isinstance(v, float) and math.isfinite(v)) or (isinstance(v, int) and abs(v) < 1 << 53)


def _clean(rec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in _TEXT:
        v = rec.get(k)
        out[k] = v[:MAX_TEXT] if isinstance(v, str) else None
    for k in _NUMBER:
        v = rec.get(k)
        out[k] = v if _finite_number(v) else None
    out["causal"] = rec.get("causal") if isinstance(rec.get("causal"), bool) else None
    out["samples"] = analysis.samples(rec)  # the times themselves stay in the file; ranking needs their count
    return out


@dataclass(frozen=True)
class SweepFile:
    run: str
    path: str
    size: int
    mtime: float


def _list_root(root: str) -> list[SweepFile]:
    if is_url(root):
        import fsspec

        fs, base = fsspec.core.url_to_fs(root)
        base = base.rstrip("/")
        fs.invalidate_cache()
        out = []
        for path, info in fs.find(base, detail=True, withdirs=False).items():
            if posixpath.basename(path) != store.FILENAME:
                continue
            rel = posixpath.relpath(path, base) if base else path
            if rel.startswith("..") or any(p.startswith(".") for p in rel.split("/")):
                continue
            out.append(SweepFile(posixpath.dirname(rel) or ".", fs.unstrip_protocol(path), int(info.get("size") or 0),
                                 _mtime(info)))
        return out
    top = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(top):
        raise FileNotFoundError(f"logdir {root} does not exist or is not a directory")
    out = []
    for d, e in walk_local(top):
        try:
            if e.name == store.FILENAME and e.is_file(follow_symlinks=False):
                st = e.stat()
                out.append(SweepFile(os.path.relpath(d, top).replace(os.sep, "/"), e.path, st.st_size, st.st_mtime))
        except OSError:
            continue
    return out


def list_sweeps(source: Source) -> list[SweepFile]:
    out: list[SweepFile] = []
    for name, root in source.roots:
        for f in _list_root(root):
            run = f.run if not name else (name if f.run == "." else f"{name}/{f.run}")
            out.append(SweepFile(run, f.path, f.size, f.mtime))
    return sorted(out, key=lambda f: f.run)


class SweepIndex:
    def __init__(self, source: Source, interval_s: float | None = 5.0):
        self.source = source
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._files: dict[str, SweepFile] = {}
        self._docs: dict[str, tuple[tuple[int, float], dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._scanned = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="tb-attn-sweeps", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            if self.interval_s is None:
                return
            self._stop.wait(self.interval_s)

    def scan(self) -> None:
        try:
            found = list_sweeps(self.source)
        except Exception as exc:  # keep what was found before
            logger.warning("tb-attn: cannot list sweeps in %s: %s", self.source.text, exc)
            found = None
        if found is not None:
            with self._lock:
                self._files = {f.run: f for f in found}
                self._docs = {k: v for k, v in self._docs.items() if k in self._files}
        self._scanned.set()

    def wait_scanned(self, timeout: float) -> bool:
        return self._scanned.wait(timeout)

    def has_sweeps(self) -> bool:
        with self._lock:
            return bool(self._files)

    def runs_json(self) -> dict[str, Any]:
        with self._lock:
            files = list(self._files.values())
        return {"sweeps": [{"run": f.run, "size_bytes": f.size} for f in files], "scanned": self._scanned.is_set()}

    def get(self, run: str, trace_runs: set[str]) -> dict[str, Any]:
        """The /sweep document. KeyError: no such sweep; ValueError: the file is unusable (message)."""
        with self._lock:
            f = self._files.get(run)
            hit = self._docs.get(run)
        if f is None:
            raise KeyError(run)
        if hit is not None and hit[0] == (f.size, f.mtime):
            doc = hit[1]
        else:
            doc = self._read(f)
            with self._lock:
                self._docs[run] = ((f.size, f.mtime), doc)
        # Profiles appear (and are analysed) independently: link only those the trace index knows.
        cells = [dict(c, profile_run=_profile_link(run, c.get("profile_run"), trace_runs)) for c in doc["cells"]]
        return {**doc, "cells": cells}

    def _read(self, f: SweepFile) -> dict[str, Any]:
        display = f.run + "/" + store.FILENAME if f.run != "." else store.FILENAME
        if f.size > store.MAX_BYTES:
            raise ValueError(f"{display}: {f.size} bytes, more than a sweep writes ({store.MAX_BYTES}); not read")
        try:
            if is_url(f.path):
                import fsspec

                with fsspec.open(f.path, "rb") as fh:
                    data = fh.read(store.MAX_BYTES + 1)
            else:
                with open(f.path, "rb") as fh:
                    data = fh.read(store.MAX_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"{display}: cannot be read: {exc}") from None
        records, skipped = store.parse(data.splitlines())  # bad cells skipped, each with a note naming its line
        records = [_clean(r) for r in records]
        records.sort(key=lambda r: (str(r.get("module") or r["backend"]), r["batch"], r["seq_len"]))
        devices = sorted({str(r.get("device")) for r in records})
        return {
            "run": f.run,
            "cells": records,
            "skipped_lines": len(skipped),
            "skipped_notes": skipped[:MAX_NOTES],
            "analysis": analysis.summarize(records),
            "conventions": {"flops": conventions.FLOPS, "timing": conventions.TIMING,
                            "peak_memory": {d: conventions.PEAK_MEMORY[d] for d in devices
                                            if d in conventions.PEAK_MEMORY},
                            "pct_of_peak": conventions.PCT_OF_PEAK},
        }


def _profile_link(sweep_run: str, rel: Any, trace_runs: set[str]) -> str | None:
    if not isinstance(rel, str) or not _PROFILE_RUN.fullmatch(rel) or ".." in rel:
        return None
    name = rel if sweep_run == "." else f"{sweep_run}/{rel}"
    return name if name in trace_runs else None
