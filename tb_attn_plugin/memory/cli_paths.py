"""Snapshot pickles given to the CLI on their own: a ``*.pickle`` file, or a directory holding
snapshots but no traces."""

from __future__ import annotations

import os

from ..format.errors import TraceError
from ..trace import discover
from .engine import is_snapshot_path, snapshot_report


def snapshot_items(path: str):
    """[(TraceFile, report or TraceError)] when ``path`` is about snapshots only, else None."""
    if os.path.isdir(path):
        if discover.find_traces(path, loose=True):
            return None  # traces there: snapshots join their reports
        found = sorted(os.path.join(d, n) for d, _, names in os.walk(path) for n in names if is_snapshot_path(n))
        if not found:
            return None
    elif is_snapshot_path(path):
        found = [path]
    else:
        return None
    out = []
    for p in found:
        tf = discover.TraceFile(p, os.path.relpath(os.path.dirname(p) or ".", path) if os.path.isdir(path) else ".",
                                os.path.basename(p), "")
        try:
            out.append((tf, snapshot_report(p)))
        except TraceError as exc:
            out.append((tf, exc))
    return out
