"""The profiler's ``[memory]`` instants (``profile_memory=True``) as one Timeline per device."""

from __future__ import annotations

from array import array

from ..trace.events import Event
from .timeline import ADDR_MASK, Timeline

MAX_BYTES = 1 << 56  # 64 PiB: beyond it a count is not a real one (and would overflow the columns)

# kineto's Device Type numbers are c10::DeviceType: CPU 0, CUDA 1, ..., HIP 6, XPU 12, MPS 13, PrivateUse1 20
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}


def device_name(device_type: int | None, device_id: int | None) -> str:
    kind = DEVICE_TYPES.get(device_type or 0, f"device{device_type}")
    return kind if kind == "cpu" or device_id is None or device_id < 0 else f"{kind}:{device_id}"


def timelines(memory: list[Event]) -> dict[str, Timeline]:
    """One finished Timeline per device named in the events (CPU and each GPU kept apart)."""
    out: dict[str, Timeline] = {}
    all_totals: dict[str, bool] = {}
    # Per (Device Type, Device Id) and per (device, pid, tid) as decoded: the Timeline and the
    # thread index, so the per-event work is two lookups (names and str() once per distinct key).
    tl_of: dict[tuple, Timeline] = {}
    thread_of: dict[tuple, int] = {}
    thread_ix: dict[str, dict[tuple, int]] = {}
    for e in memory:
        a = e.args
        if a is None or not a.nbytes or not -MAX_BYTES < a.nbytes < MAX_BYTES:
            continue  # nothing allocated, or not a real size (it would overflow the columns)
        dkey = (a.device_type, a.device_id)
        tl = tl_of.get(dkey)
        if tl is None:
            dev = device_name(a.device_type, a.device_id)
            tl = out.get(dev)
            if tl is None:
                tl = out[dev] = Timeline(dev, total=array("q"), reserved=array("q"))
                thread_ix[dev] = {}
                all_totals[dev] = True
            tl_of[dkey] = tl
        tkey = (tl.device, e.pid, e.tid)
        ti = thread_of.get(tkey)
        if ti is None:
            key = (str(e.pid), str(e.tid))
            ti = thread_ix[tl.device].get(key)
            if ti is None:
                ti = thread_ix[tl.device][key] = len(tl.threads)
                tl.threads.append(key)
            thread_of[tkey] = ti
        tl.t.append(e.ts)
        tl.delta.append(int(a.nbytes))
        tl.addr.append((a.addr or 0) & ADDR_MASK)
        tl.stream.append(0)  # the profiler records no stream; an address is reused only once freed
        tl.thread.append(ti)
        if a.total_allocated is None or not -MAX_BYTES < a.total_allocated < MAX_BYTES:
            all_totals[tl.device] = False
            tl.total.append(0)
        else:
            tl.total.append(int(a.total_allocated))
        r = a.total_reserved or 0
        tl.reserved.append(r if -MAX_BYTES < r < MAX_BYTES else 0)
    for dev, tl in out.items():
        if not all_totals[dev]:
            tl.total = None  # a running sum is the only consistent curve then
        tl.finish()
    return out


def main_device(tls: dict[str, Timeline]) -> str | None:
    """The device whose memory the report is about: the accelerator with the highest peak, else the CPU."""
    if not tls:
        return None
    gpus = [d for d in tls if d != "cpu"]
    pool = gpus or list(tls)
    return max(pool, key=lambda d: max(tls[d].live) if len(tls[d].live) else 0)
