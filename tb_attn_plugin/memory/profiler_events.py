"""The profiler's ``[memory]`` instants (``profile_memory=True``) as one Timeline per device."""

from __future__ import annotations

import numpy as np

from ..trace.events import CATS, MEMORY_FIELDS, Event
from ..table.arrays import as_array, intern, runs_of
from ..trace.records import NO_ARGS, NULL, Table
from .timeline import ADDR_MASK, Timeline

MAX_BYTES = 1 << 56  # 64 PiB: beyond it a count is not a real one (and would overflow the columns)

# kineto's Device Type numbers are c10::DeviceType: CPU 0, CUDA 1, ..., HIP 6, XPU 12, MPS 13, PrivateUse1 20
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}


def device_name(device_type: int | None, device_id: int | None) -> str:
    kind = DEVICE_TYPES.get(device_type or 0, f"device{device_type}")
    return kind if kind == "cpu" or device_id is None or device_id < 0 else f"{kind}:{device_id}"


def timelines(memory: Table | list[Event]) -> dict[str, Timeline]:
    """One finished Timeline per device named in the events (CPU and each GPU kept apart), from the
    [memory] instants' columns (events.Events.memory) or from Events: each device's events in file
    order, those without a real size (none, 0, beyond MAX_BYTES) left out."""
    t = memory if isinstance(memory, Table) else Table.of(memory, MEMORY_FIELDS, CATS)
    nulls, nbytes = t["nulls"], t["nbytes"]
    rows = np.flatnonzero(((nulls & (NULL["nbytes"] | NO_ARGS)) == 0) & (nbytes != 0)
                          & (-MAX_BYTES < nbytes) & (nbytes < MAX_BYTES))
    nulls = nulls[rows]

    def col(name: str) -> np.ndarray:  # the arg at the kept rows, 0 where null
        return np.where(nulls & NULL[name], 0, t[name][rows])

    # One group per device *name*: (type, id) pairs that name one device share its timeline.
    pairs = runs_of(col("device_type"), np.where(nulls & NULL["device_id"], -1, t["device_id"][rows]))
    names = intern([device_name(dt, di) for dt, di in pairs.values])
    device = names.ids[pairs.ids]
    total = col("total_allocated")
    total_ok = ((nulls & NULL["total_allocated"]) == 0) & (-MAX_BYTES < total) & (total < MAX_BYTES)
    reserved = col("total_reserved")
    reserved = np.where((-MAX_BYTES < reserved) & (reserved < MAX_BYTES), reserved, 0)
    cols = {"t": t["ts"][rows], "delta": nbytes[rows], "addr": col("addr") & ADDR_MASK,
            "total": np.where(total_ok, total, 0), "reserved": reserved}
    pid, tid = t["pid"][rows], t["tid"][rows]
    out: dict[str, Timeline] = {}
    for d, dev in enumerate(names.values):
        at = np.flatnonzero(device == d)
        tl = out[dev] = Timeline(dev, **{name: as_array("d" if name == "t" else "q",
                                                        c[at].astype(np.float64 if name == "t" else np.int64))
                                         for name, c in cols.items()})
        tl.stream.frombytes(bytes(8 * len(at)))  # the profiler records no stream
        # Threads by name, first seen first: pid 5 and "5" are one thread, as str() says.
        th = runs_of(pid[at], tid[at])
        keys = intern([(str(p), str(q)) for p, q in th.values])
        tl.thread = as_array("q", keys.ids[th.ids].astype(np.int64))
        tl.threads.extend(keys.values)
        if not total_ok[at].all():
            tl.total = None  # a running sum is the only consistent curve then
        tl.finish()
    return out


def main_device(tls: dict[str, Timeline]) -> str | None:
    """The device whose memory the report is about: the accelerator with the highest peak, else the CPU."""
    if not tls:
        return None
    gpus = [d for d in tls if d != "cpu"]
    pool = gpus or list(tls)
    return max(pool, key=lambda d: tls[d].peak_bytes())
