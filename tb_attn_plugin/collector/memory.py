"""``profile(..., memory=True)``: the profiler's memory events and, on CUDA, allocator history
dumped as a snapshot beside each trace (``{worker}.{time}.memory.pickle``)."""

from __future__ import annotations

import inspect
import logging

import torch

log = logging.getLogger(__name__)
MAX_ENTRIES = 1_000_000  # allocator history kept (a ring buffer): about a million alloc/free events
_told_cpu_only = False


def history_kwargs(fn) -> dict:
    """Arguments for torch.cuda.memory._record_memory_history that this torch accepts: Python
    stacks, every action, annotations of record_function ranges (the collector's call tags)."""
    wanted = {"enabled": "all", "context": "all", "stacks": "python", "max_entries": MAX_ENTRIES,
              "global_record_annotations": True, "clear_history": True}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {"max_entries": MAX_ENTRIES}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return {k: v for k, v in wanted.items() if k in ("enabled", "context", "stacks", "max_entries")}
    return {k: v for k, v in wanted.items() if k in params}


class MemoryRecorder:
    """Starts CUDA allocator history for a profiling window, dumps it, stops it; a no-op without CUDA."""

    def __init__(self):
        global _told_cpu_only
        self.cuda = torch.cuda.is_available() and hasattr(torch.cuda.memory, "_record_memory_history")
        self.recording = False
        if not self.cuda and not _told_cpu_only:
            _told_cpu_only = True
            log.warning("tb_attn: memory=True without CUDA: recording the profiler's memory events only "
                        "(profile_memory=True); CUDA allocator snapshots need a GPU")

    def start(self) -> None:
        if not self.cuda or self.recording:
            return
        try:
            fn = torch.cuda.memory._record_memory_history
            fn(**history_kwargs(fn))
            self.recording = True
        except Exception as e:  # never stop training for a diagnostic
            log.warning("tb_attn: could not record CUDA memory history: %s", e)
            self.cuda = False

    def dump(self, path: str) -> str | None:
        """Write the snapshot of the window to ``path``; returns it, or None when nothing was recorded."""
        if not self.recording:
            return None
        try:
            torch.cuda.memory._dump_snapshot(path)
            return path
        except Exception as e:
            log.warning("tb_attn: could not write the memory snapshot %s: %s", path, e)
            return None

    def stop(self) -> None:
        if not self.recording:
            return
        self.recording = False
        try:
            torch.cuda.memory._record_memory_history(enabled=None)
        except Exception as e:
            log.warning("tb_attn: could not stop CUDA memory history: %s", e)
