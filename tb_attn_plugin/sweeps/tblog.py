"""A sweep in TensorBoard: HParams summaries (one session per cell, so the HPARAMS tab lists every
cell) and scalars of time and memory against sequence length per backend, written with
TensorBoard's own protobufs and event writer (no TensorFlow needed)."""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

HPARAMS_DIR = "hparams"
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


class SweepLogger:
    """Writes as cells finish, so an interrupted sweep is in TensorBoard up to its last cell."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._scalars = None

    def cell(self, rec: dict[str, Any]) -> None:
        from tensorboard.plugins.hparams import summary_v2

        session_dir = os.path.join(self.logdir, HPARAMS_DIR, rec["cell_id"])
        w = _writer(session_dir, ".tb_attn_sweep")
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

    def experiment(self, records: Iterable[dict[str, Any]]) -> None:
        """The HParams experiment config over every cell so far (written at the end of each run;
        without it TensorBoard infers the same from the sessions)."""
        from tensorboard.plugins.hparams import summary_v2 as hp  # api.py would import TensorFlow for Keras

        records = list(records)
        hparams = []
        for k in HPARAMS:
            values = sorted({r.get(k) for r in records if r.get(k) is not None}, key=str)
            if not values:
                continue
            if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values) or \
                    all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                hparams.append(hp.HParam(k, hp.Discrete(values)))
            else:
                hparams.append(hp.HParam(k))
        metrics = [hp.Metric(tag, display_name=tag.split("/", 1)[1], description=desc)
                   for tag, (_, _, desc) in METRICS.items()]
        w = _writer(os.path.join(self.logdir, HPARAMS_DIR), ".tb_attn_sweep")
        w.add_event(_event(hp.hparams_config_pb(hparams, metrics)))
        w.close()

    def close(self) -> None:
        if self._scalars is not None:
            self._scalars.close()
            self._scalars = None
