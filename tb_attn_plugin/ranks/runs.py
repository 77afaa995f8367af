"""From (trace file, report) pairs of a logdir to one rank summary per run that is a distributed job."""

from __future__ import annotations

from typing import Any, Iterable

from ..report.spans import is_empty
from .summary import summarize_ranks


def rank_summaries(items: Iterable[tuple[Any, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """[(run, summary)] for each run whose traces are two or more ranks. ``items`` are
    (TraceFile, report dict or an error) as analyze_path yields them; each worker's latest span
    that recorded something stands for that rank (files come sorted by run, worker and span)."""
    latest: dict[str, dict[str, Any]] = {}
    for tf, result in items:
        if isinstance(result, dict):
            held = latest.setdefault(tf.run, {})
            if tf.worker not in held or not is_empty(result) or is_empty(held[tf.worker]):
                held[tf.worker] = result
    out = []
    for run in sorted(latest):
        doc = summarize_ranks(latest[run].values())
        if doc is not None:
            out.append((run, doc))
    return out
