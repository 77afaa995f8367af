"""Which span stands for a worker: the latest that recorded something, not an empty tail.

A profiler window cut short (the loop ended one step into it) leaves a trace with an empty step
and no attention; shown first, it reads as "attention 0 µs". Every place that picks a worker's
span by default (the tab, /ranks, ``tb-attn compare``) asks this module.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, TypeVar

T = TypeVar("T")


def is_empty(report: Mapping[str, Any]) -> bool:
    """True for a report with no attention call and no profiler step that took any time (CPU or
    GPU); a trace recorded without steps counts its total time instead."""
    if report.get("calls"):
        return False
    steps = report.get("steps") or []
    if not steps:
        return not ((report.get("total_cpu_us") or 0) > 0 or (report.get("total_gpu_us") or 0) > 0)
    return not any((s.get("cpu_us") or 0) > 0 or (s.get("gpu_us") or 0) > 0 for s in steps)


def pick_latest(items: Sequence[T], empty: Callable[[T], bool]) -> T:
    """The last of ``items`` (ordered oldest first) that is not empty; the last one when all are."""
    for item in reversed(items):
        if not empty(item):
            return item
    return items[-1]
