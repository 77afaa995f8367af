"""A sweep in TensorBoard: scalars of time and memory against sequence length per backend in ONE run
(the sweep's logdir), and, when asked, HParams summaries (one session per cell, so the HPARAMS tab
lists every cell) in a logdir of their own. Written with TensorBoard's own protobufs and event writer
(no TensorFlow needed).

Why sessions go elsewhere: every session is a run, and TensorBoard's run selector turns runs on by
default only while few enough match (tf-multi-checkbox's maxNamesToEnableByDefault = 40 for the
Scalars tab in TensorBoard 2.21; 500 in Time Series): a sweep of 56 cells beside a user's training
runs left the Scalars tab with nothing selected. So a sweep adds one run to the user's logdir, and
its sessions go under ``HPARAMS_LOGDIR/<sweep>/<cell>``, where several sweeps share one HParams view.
No experiment config is written: TensorBoard then infers the hparams' domains from every session
there, so a second sweep's values are filterable too (a written config would hold only its own)."""

from __future__ import annotations

import os
import time
from typing import Any

HPARAMS = ("backend", "batch", "seq_len", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass", "device",
           "device_name", "module", "status")
# metric tag -> (record field, factor, description)
METRICS = {
    "sweep/median_ms": ("median_s", 1e3, "median time per call (ms), torch.utils.benchmark blocked_autorange"),
    "sweep/iqr_ms": ("iqr_s", 1e3, "interquartile range of the time per call (ms)"),
    "sweep/peak_mib": ("peak_bytes", 1 / 2**20, "peak memory of one call above its inputs (MiB)"),
    "sweep/tflops": ("tflops", 1.0, "TFLOP/s, FlashAttention convention"),
    "sweep/tokens_per_s": ("tokens_per_s", 1.0, "batch * seq_len / median time"),
    "sweep/max_abs_error": ("max_abs_error", 1.0, "max |output - math backend output|"),
}


def _writer(logdir: str, suffix: str):
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    return EventFileWriter(logdir, filename_suffix=suffix)


def _event(summary, step: int = 0, wall_time: float | None = None):
    from tensorboard.compat.proto import event_pb2

    return event_pb2.Event(wall_time=wall_time or time.time(), step=int(step), summary=summary)


def _scalars(values: dict[str, float]):
    from tensorboard.compat.proto import summary_pb2

    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values.items()])


def hparam_values(rec: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k in HPARAMS:
        v = rec.get(k)
        if v is None:
            continue
        out[k] = v if isinstance(v, (bool, int, float, str)) else str(v)
    return out


def metric_values(rec: dict[str, Any]) -> dict[str, float]:
    out = {}
    for tag, (field, factor, _) in METRICS.items():
        v = rec.get(field)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[tag] = float(v) * factor
    return out


def series_tag(rec: dict[str, Any], what: str) -> str:
    name = rec["backend"] if not rec.get("module") else rec["module"]
    return f"sweep/{what}/{name}/batch{rec['batch']}"


def sessions_dir(hparams_logdir: str, sweep_logdir: str) -> str:
    """Where one sweep's sessions go: a folder named after the sweep's logdir."""
    return os.path.join(hparams_logdir, os.path.basename(os.path.abspath(sweep_logdir)) or "sweep")


class SweepLogger:
    """Writes as cells finish, so an interrupted sweep is in TensorBoard up to its last cell."""

    def __init__(self, logdir: str, hparams_logdir: str | None = None):
        self.logdir = logdir
        self.sessions = sessions_dir(hparams_logdir, logdir) if hparams_logdir else None
        self._scalars = None

    def cell(self, rec: dict[str, Any]) -> None:
        if self.sessions is not None:
            from tensorboard.plugins.hparams import summary_v2

            w = _writer(os.path.join(self.sessions, rec["cell_id"]), ".tb_attn_sweep")
            w.add_event(_event(summary_v2.hparams_pb(hparam_values(rec), trial_id=rec["cell_id"],
                                                     start_time_secs=rec.get("wall_time"))))
            metrics = metric_values(rec)
            if metrics:
                w.add_event(_event(_scalars(metrics)))
            w.close()
        if rec["status"] == "ok":
            if self._scalars is None:
                self._scalars = _writer(self.logdir, ".tb_attn_sweep")
            vals = {series_tag(rec, "time_ms"): rec["median_s"] * 1e3}
            if rec.get("peak_bytes") is not None:
                vals[series_tag(rec, "peak_mib")] = rec["peak_bytes"] / 2**20
            if rec.get("tflops") is not None:
                vals[series_tag(rec, "tflops")] = rec["tflops"]
            # step = sequence length: TensorBoard's scalar charts then plot against it
            self._scalars.add_event(_event(_scalars(vals), step=rec["seq_len"]))
            self._scalars.flush()

    def close(self) -> None:
        if self._scalars is not None:
            self._scalars.close()
            self._scalars = None
