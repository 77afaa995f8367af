"""``tb_attn_plugin.profile``: torch.profiler.profile that tags attention and logs it to TensorBoard.

    with tb_attn_plugin.profile("runs/sdpa-L1024", model=model, variant="sdpa",
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=2)) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

It is a subclass of torch.profiler.profile, so every option and method of it works. Tags exist
only while the window records (warmup and active steps); outside it nothing is patched or hooked.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Iterable

import torch
from torch.profiler import ProfilerAction, ProfilerActivity

from . import peaks as peak_meter
from ..format import tags
from . import run_info
from .hooks import Tagger
from .memory import MemoryRecorder
from .region import attention_region, stage
from .scalars import PREFIX, ScalarWriter, report_scalars

__all__ = ["profile", "attention_region", "stage", "default_activities"]
log = logging.getLogger(__name__)
_RECORDING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def default_activities() -> list[ProfilerActivity]:
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    return acts


class profile(torch.profiler.profile):
    """Arguments beyond torch.profiler.profile's:

    logdir: run directory; traces go to ``{logdir}/{worker}.{time_ns}.pt.trace.json.gz`` as
        tensorboard_trace_handler writes them. None: only the user's ``on_trace_ready`` runs.
    model: the model, for module paths (``model.layers.0.self_attn``) and for the modules tagged
        by hooks (nn.MultiheadAttention, Hugging Face eager attention). Optional.
    variant: the run's name in the metadata (``sdpa``, ``math``, ...), so runs compare by what differs.
    extra: more metadata (e.g. ``{"seq_len": 1024}``).
    scalars: analyse each trace and log attention time as TensorBoard scalars in ``logdir``.
    worker_name: defaults to ``{host}_rank{r}`` under torch.distributed/torchrun, else ``{host}_{pid}``.
    memory: record memory: ``profile_memory=True`` and, on CUDA, the caching allocator's history
        (Python stacks, the attention calls' tags as annotations), dumped beside each trace as
        ``{worker}.{time_ns}.memory.pickle``; without CUDA only the profiler's memory events.
    measure_peaks: record this machine's measured matmul FLOP/s and copy bandwidth in the trace
        metadata (for the roofline). None: only for the CPU and GPUs the data-sheet table lacks.
        Measured once per machine (about a second, before the profiler starts), then cached.
    """

    def __init__(self, logdir: str | os.PathLike | None = None, *, model: torch.nn.Module | None = None,
                 variant: str | None = None, extra: dict[str, Any] | None = None,
                 activities: Iterable[ProfilerActivity] | None = None, schedule: Callable[[int], Any] | None = None,
                 on_trace_ready: Callable[[Any], Any] | None = None, record_shapes: bool = True,
                 profile_memory: bool = False, with_stack: bool = False, scalars: bool = True,
                 worker_name: str | None = None, use_gzip: bool = True, memory: bool = False,
                 measure_peaks: bool | None = None, **kwargs: Any):
        if logdir is None and on_trace_ready is None:
            raise ValueError("tb_attn_plugin.profile needs a logdir (or an on_trace_ready handler) to write traces to")
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
        if extra is not None and not isinstance(extra, dict):
            raise TypeError(f"extra must be a dict, not {type(extra).__name__}")
        self.logdir = os.fspath(logdir) if logdir is not None else None
        self.model, self.variant, self.extra = model, variant, dict(extra or {})
        self.worker = worker_name or run_info.worker_name()
        self.use_gzip = use_gzip
        self.traces: list[str] = []  # files written, in order
        self.reports: list[dict[str, Any]] = []  # engine reports of those files (when scalars=True)
        self._user_handler = on_trace_ready
        self._scalars = scalars and self.logdir is not None
        rank, world = run_info.rank_and_world()
        self._scalar_prefix = f"{PREFIX}/rank{rank}" if world and world > 1 else PREFIX
        self._writer = ScalarWriter(self.logdir, suffix=f".{self.worker}.tb_attn") if self._scalars else None
        self._analysis: threading.Thread | None = None
        self._tagger = Tagger(model)
        self._metadata_added = False
        self._memory = MemoryRecorder() if memory else None
        self.snapshots: list[str] = []  # memory snapshots written, in order (memory=True on CUDA)
        profile_memory = profile_memory or memory
        self._measure_peaks = measure_peaks
        self._peaks: dict[str, Any] | None = None
        self._scheduled = schedule is not None
        self._steps_recorded = 0  # steps completed while this window recorded (RECORD / RECORD_AND_SAVE)
        self.skipped_windows = 0  # windows cut short before a step completed: no trace written for them
        super().__init__(activities=list(activities) if activities is not None else default_activities(),
                         schedule=schedule, on_trace_ready=self._trace_ready_handler, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack, **kwargs)

    # -- window tracking ------------------------------------------------------------------------
    def start(self) -> None:
        self._peaks = self._measured_peaks()  # before recording starts: its matmuls stay out of the trace
        super().start()
        self._sync()

    def step(self) -> None:
        # Tags stay in place from one recording step to the next: installing them scans every loaded
        # module for aliases of the attention functions (milliseconds), so it happens once per window.
        # _sync() takes them off when the next step does not record.
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._steps_recorded += 1
        super().step()
        self._sync()

    def stop(self) -> None:
        self._tagger.uninstall()
        super().stop()
        if self._memory is not None:
            self._memory.stop()

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            super().__exit__(exc_type, exc_val, exc_tb)
        finally:
            self._tagger.uninstall()
            if self._memory is not None:
                self._memory.stop()
            self.wait()
            if self._writer is not None:
                self._writer.close()

    def _sync(self) -> None:
        if self.current_action in _RECORDING:
            self._tagger.install()
            if self._memory is not None:
                self._memory.start()
            if not self._metadata_added and self.profiler is not None:
                self.add_metadata_json(tags.METADATA_KEY, self._metadata_json())
                self._metadata_added = True
        else:
            self._tagger.uninstall()

    def _metadata_json(self) -> str:
        meta = run_info.metadata(self.variant, self.model, self.extra)
        meta["worker"] = self.worker
        if self._memory is not None:
            meta["memory"] = True  # asked for: a span without memory events then says why, not "pass memory=True"
        if self._peaks is not None:
            meta["peaks"] = self._peaks
        return tags.run_metadata(**meta)

    def _measured_peaks(self) -> dict[str, Any] | None:
        if self._measure_peaks is False:
            return None
        dev = run_info.device_of(self.model)
        if self._measure_peaks is None and not peak_meter.needs_measurement(dev):
            return None
        return peak_meter.measured_peaks(dev)

    # -- trace written --------------------------------------------------------------------------
    def _trace_ready_handler(self, prof) -> None:
        self._metadata_added = False  # the next window is a new trace
        steps, self._steps_recorded = self._steps_recorded, 0
        if self._scheduled and steps == 0:
            # The loop ended inside a window before any of its active steps completed (a schedule
            # without repeat=... cycles on): the trace would hold an empty step and no attention.
            # Written, it would be the latest span, the one a user sees first; so it is not written.
            self.skipped_windows += 1
            if self._memory is not None:
                self._memory.stop()
            log.info("tb_attn: profiling stopped at step %d before the window recorded a full step: "
                     "no trace written for it (give the schedule repeat=N to profile N windows only)", self.step_num)
            if self._user_handler is not None:  # the user's own handler decides for itself
                self._user_handler(prof)
            return
        if self.logdir is not None:
            os.makedirs(self.logdir, exist_ok=True)
            stamp = f"{self.worker}.{time.time_ns()}"
            name = f"{stamp}.pt.trace.json" + (".gz" if self.use_gzip else "")
            path = os.path.join(self.logdir, name)
            if self._memory is not None:  # first, so the snapshot is there when the trace appears
                snap = self._memory.dump(os.path.join(self.logdir, f"{stamp}.memory.pickle"))
                self._memory.stop()  # the next window starts a fresh history
                if snap:
                    self.snapshots.append(snap)
            prof.export_chrome_trace(path)
            self.traces.append(path)
            if self._scalars:
                self._analyse_later(path, self.step_num)
        if self._user_handler is not None:
            self._user_handler(prof)

    def _analyse_later(self, path: str, step: int) -> None:
        """The engine runs in a thread, so the training loop goes on; one analysis at a time."""
        self.wait()
        t = threading.Thread(target=self._analyse, args=(path, step), name="tb_attn-analysis", daemon=True)
        self._analysis = t
        t.start()

    def _analyse(self, path: str, step: int) -> None:
        try:
            from ..report.build import analyze_file

            report = analyze_file(path)
        except Exception as e:  # a failed analysis must never stop training
            log.warning("tb_attn: could not analyse %s: %s", path, e)
            return
        self.reports.append(report)
        rf = report.get("roofline") or {}
        if rf.get("above_roof") and (rf.get("roof") or {}).get("kind") == "measured" and self._peaks is not None:
            # a rate above the roof this process measured: the measurement was low; the next profile measures again
            log.warning("tb_attn: %s", rf["above_roof"])
            peak_meter.forget(self._peaks.get("device_type") or "cpu")
        values = report_scalars(report, self._scalar_prefix)
        if not values:
            return
        try:
            self._writer.write(step, values)
        except Exception as e:
            log.warning("tb_attn: could not write scalars to %s: %s", self.logdir, e)

    def wait(self) -> None:
        """Block until the last trace's analysis and scalars are written."""
        t = self._analysis
        if t is not None:
            t.join()
            self._analysis = None
