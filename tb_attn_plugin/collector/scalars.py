"""Attention time as TensorBoard scalars, written with TensorBoard's own event writer (protobuf
summaries), so the Time Series tab shows attention over training next to the loss."""

from __future__ import annotations

import time
from typing import Any

from ..report.spans import is_empty

PREFIX = "tb_attn"


def report_scalars(report: dict[str, Any], prefix: str = PREFIX) -> dict[str, float]:
    """tag -> value for one analysed trace: attention share, total, calls, and each stage and pass
    (milliseconds on the report's time basis: GPU time when the trace has kernels, else CPU time).
    Nothing for a span that recorded nothing (report.spans.is_empty): its zeros are not a measurement."""
    if is_empty(report):
        return {}
    basis = report.get("time_basis", "cpu")
    out = {
        f"{prefix}/attention_share": float(report.get("attention_share") or 0.0),
        f"{prefix}/attention_ms": float(report.get(f"attention_{basis}_us") or 0.0) / 1e3,
        f"{prefix}/total_ms": float(report.get(f"total_{basis}_us") or 0.0) / 1e3,
        f"{prefix}/calls": float(report.get("calls") or 0),
    }
    steps = [s for s in report.get("steps") or [] if s.get("step", -1) >= 0]
    if steps:
        out[f"{prefix}/calls_per_step"] = out[f"{prefix}/calls"] / len(steps)
    for row in report.get("stages") or []:
        out[f"{prefix}/stage/{row['stage']}/{row['pass']}_ms"] = float(row.get(f"{basis}_us") or 0.0) / 1e3
    mem = report.get("memory")
    if mem:  # recorded with memory=True / profile_memory=True: peak and score-matrix bytes, in MiB
        out[f"{prefix}/memory/peak_mib"] = mem["peak_bytes"] / 2**20
        out[f"{prefix}/memory/score_matrix_mib"] = mem["score_matrix"]["bytes_total"] / 2**20
    return out


class ScalarWriter:
    """One event file in the run directory, opened on first use."""

    def __init__(self, logdir: str, suffix: str = ".tb_attn"):
        self.logdir, self.suffix = logdir, suffix
        self._w = None

    def write(self, step: int, values: dict[str, float], wall_time: float | None = None) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        if self._w is None:
            self._w = EventFileWriter(self.logdir, filename_suffix=self.suffix)
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values.items()])
        self._w.add_event(event_pb2.Event(wall_time=wall_time or time.time(), step=int(step), summary=summary))
        self._w.flush()

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
            self._w = None
