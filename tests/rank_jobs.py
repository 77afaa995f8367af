"""Builds the traces of a distributed job from one recorded CPU trace: one file per rank, each
a copy whose rank is told by ``distributedInfo`` (as kineto writes it) or only by the worker name,
optionally slowed down (every time stamp and duration stretched) or swapped for another trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def stretched(doc: dict, factor: float) -> dict:
    """The trace with every event's time after the first and its duration multiplied by factor:
    nesting and order stay as recorded, every duration grows by the same ratio."""
    events = doc["traceEvents"]
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    out = []
    for e in events:
        e = dict(e)
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = t0 + (e["ts"] - t0) * factor
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * factor
        out.append(e)
    return {**doc, "traceEvents": out}


def write_job(out: Path, traces: dict[int, Path], *, world_size: int | None = None, by: str = "distributedInfo",
              slow: dict[int, float] | None = None, gz: bool = True) -> dict[int, Path]:
    """One file per rank under ``out``, named as tensorboard_trace_handler names them. ``traces``
    maps rank -> source trace; ``by`` is "distributedInfo" (worker names carry no rank) or
    "worker name" (no distributedInfo, workers named host_rank{N})."""
    out.mkdir(parents=True, exist_ok=True)
    world = world_size or len(traces)
    written = {}
    for rank, src in traces.items():
        doc = json.loads(Path(src).read_bytes())
        doc.pop("distributedInfo", None)
        if slow and rank in slow:
            doc = stretched(doc, slow[rank])
        if by == "distributedInfo":
            doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1}
            worker = f"node{rank // 4}_{4000 + rank}"
        else:
            worker = f"host_rank{rank}"
        name = f"{worker}.{1700000000000 + rank}.pt.trace.json" + (".gz" if gz else "")
        data = json.dumps(doc).encode()
        (out / name).write_bytes(gzip.compress(data, 1) if gz else data)
        written[rank] = out / name
    return written
