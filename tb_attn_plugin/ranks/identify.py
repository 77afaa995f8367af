"""Which rank a trace belongs to: kineto's ``distributedInfo``, else a ``…rank{N}…`` worker name."""

from __future__ import annotations

import re
from typing import Any, Mapping

# torch.profiler.tensorboard_trace_handler names files {worker}.{time}; launchers put the rank in
# the worker name in several spellings: rank3, rank_3, rank-3, host_rank3, RANK3.
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,7})(?!\d)", re.IGNORECASE)
MAX_RANK = 10_000_000


def rank_of(report: Mapping[str, Any]) -> tuple[int, int | None, str] | None:
    """(rank, world size or None, where it came from: "distributedInfo" | "worker name"), or None."""
    dist = report.get("distributed") or {}
    rank, world = dist.get("rank"), dist.get("world_size")
    if _is_count(rank) and (world is None or _is_count(world)):
        return int(rank), (int(world) if world is not None and world > 0 else None), "distributedInfo"
    m = _RANK_IN_NAME.search(worker_of(report))
    if m:
        return int(m.group(1)), None, "worker name"
    return None


def worker_of(report: Mapping[str, Any]) -> str:
    """The report's worker name (its trace file's first part), "" when it has none."""
    return str((report.get("source") or {}).get("worker") or "")


def rank_from_name(worker: str) -> int | None:
    m = _RANK_IN_NAME.search(worker or "")
    return int(m.group(1)) if m else None


def _is_count(v: Any) -> bool:
    # bool is an int in Python; a rank never is one. Untrusted traces may carry anything here.
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_RANK
