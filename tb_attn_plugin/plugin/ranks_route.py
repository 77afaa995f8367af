"""/ranks?run=R: the rank summary of a run whose traces are ranks of one job (see ranks/summary.py).

Each worker's latest span stands for its rank. Only the fields the summary reads are decoded from
each cached report (msgspec skips kernels, ops and call samples), and the answer is kept per run
until one of its files changes, so a run of a thousand ranks is summarised once, not per request.
"""

from __future__ import annotations

import threading
from typing import Any

import msgspec

from ..ranks.summary import summarize_ranks
from .index import ERROR, LOADING, RunIndex, unreadable

MAX_CACHED_RUNS = 64
MAX_WAITING_LISTED = 8


class _Layer(msgspec.Struct):
    """The fields of a report's Layer the summary reads."""
    layer: str
    gpu_us: float
    cpu_us: float
    backend: str


class _RankFields(msgspec.Struct):
    source: Any = None
    distributed: Any = None
    time_basis: Any = None
    total_gpu_us: Any = None
    total_cpu_us: Any = None
    attention_gpu_us: Any = None
    attention_cpu_us: Any = None
    calls: Any = None
    stages: Any = None
    implementations: Any = None
    layers: list[_Layer] | None = None


_decoder = msgspec.json.Decoder(_RankFields)


def _as_dict(v: _RankFields) -> dict[str, Any]:
    return {f: getattr(v, f) for f in v.__struct_fields__}


class RanksAnswers:
    def __init__(self, index: RunIndex):
        self.index = index
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple, tuple[int, bytes]]] = {}

    def answer(self, run: str) -> tuple[int, Any]:
        """(HTTP status, body): 200 with the summary, 202 while ranks are analysed, 200 with
        ``not_a_job`` (the reason) when the run is not a job of several ranks: a run the tab lists is
        no missing resource, and a 404 there is logged by the browser as an error. Raises UnknownName
        for a run the index does not know (its 404)."""
        entries = [e for e in self.index.latest_entries(run) if not e.is_snapshot]  # snapshots are no ranks
        loading = [e for e in entries if e.status == LOADING]
        if loading:
            for e in loading:
                self.index.want(e)
            return 202, {"status": "loading", "waiting_for": [e.display for e in loading[:MAX_WAITING_LISTED]],
                         "ready": len(entries) - len(loading), "total": len(entries)}
        version = tuple((e.worker, e.key, e.status) for e in entries)
        with self._lock:
            hit = self._cache.get(run)
        if hit is not None and hit[0] == version:
            return hit[1]
        reports, errors = [], []
        for e in entries:
            if e.status == ERROR:
                errors.append(e.message or e.display)
                continue
            body = self.index.report_bytes(e)
            if body is None:  # gone from the cache: being analysed again
                return 202, {"status": "loading", "waiting_for": [e.display], "ready": 0, "total": len(entries)}
            try:
                reports.append(_as_dict(_decoder.decode(body)))
            except msgspec.DecodeError as exc:  # a damaged cache entry: the route's 422
                raise ValueError(unreadable(e.display, exc)) from None
        doc = summarize_ranks(reports)
        if doc is None:
            failed = f" ({len(errors)} of its {len(entries)} traces failed, first: {errors[0]})" if errors else ""
            answer = (200, {"run": run, "not_a_job": f"run {run!r} is not a job of several ranks: fewer than two of "
                                                   f"its traces carry a rank (kineto's distributedInfo, or a worker named "
                                                   f"like rank3){failed}",
                            "errors": errors[:MAX_WAITING_LISTED]})
        else:
            doc = {"run": run, **doc, "errors": errors}
            answer = (200, msgspec.json.encode(doc))
        with self._lock:
            if len(self._cache) >= MAX_CACHED_RUNS:
                self._cache.clear()
            self._cache[run] = (version, answer)
        return answer
