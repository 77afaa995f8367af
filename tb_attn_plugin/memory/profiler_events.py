"""The profiler's ``[memory]`` instants (``profile_memory=True``) as one Timeline per device."""

from __future__ import annotations

from array import array

from ..trace import native
from ..trace.events import Event
from ..trace.memory_records import MemoryEvents
from .timeline import ADDR_MASK, Timeline

MAX_BYTES = 1 << 56  # 64 PiB: beyond it a count is not a real one (and would overflow the columns)

# kineto's Device Type numbers are c10::DeviceType: CPU 0, CUDA 1, ..., HIP 6, XPU 12, MPS 13, PrivateUse1 20
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}


def device_name(device_type: int | None, device_id: int | None) -> str:
    kind = DEVICE_TYPES.get(device_type or 0, f"device{device_type}")
    return kind if kind == "cpu" or device_id is None or device_id < 0 else f"{kind}:{device_id}"


def timelines(memory: MemoryEvents | list[Event]) -> dict[str, Timeline]:
    """One finished Timeline per device named in the events (CPU and each GPU kept apart)."""
    out: dict[str, Timeline] = {}
    all_totals: dict[str, bool] = {}
    # Per (Device Type, Device Id) and per (device, pid, tid) as decoded: the Timeline and the
    # thread index, so the per-event work is two lookups (names and str() once per distinct key).
    tl_of: dict[tuple, Timeline] = {}
    thread_of: dict[tuple, int] = {}
    thread_ix: dict[str, dict[tuple, int]] = {}

    def timeline(dkey: tuple) -> Timeline:
        tl = tl_of.get(dkey)
        if tl is None:
            dev = device_name(*dkey)
            tl = out.get(dev)
            if tl is None:
                tl = out[dev] = Timeline(dev, total=array("q"), reserved=array("q"))
                thread_ix[dev] = {}
                all_totals[dev] = True
            tl_of[dkey] = tl
        return tl

    def thread(tl: Timeline, pid, tid) -> int:
        tkey = (tl.device, pid, tid)
        ti = thread_of.get(tkey)
        if ti is None:
            key = (str(pid), str(tid))
            ti = thread_ix[tl.device].get(key)
            if ti is None:
                ti = thread_ix[tl.device][key] = len(tl.threads)
                tl.threads.append(key)
            thread_of[tkey] = ti
        return ti

    for part in (memory.parts if isinstance(memory, MemoryEvents) else [memory]):
        if isinstance(part, list):
            _add_events(part, timeline, thread, all_totals)
            continue
        # The scanner's records, already split into columns per device (C): the same rules.
        for dt, di, t, delta, addr, local, threads, total, total_ok, reserved in \
                native.memory_columns(part, MAX_BYTES, ADDR_MASK):
            tl = timeline((dt, di))
            remap = [thread(tl, pid, tid) for pid, tid in threads]
            tl.t.frombytes(t)
            tl.delta.frombytes(delta)
            tl.addr.frombytes(addr)
            tl.stream.frombytes(bytes(len(delta)))  # the profiler records no stream
            if remap == list(range(len(remap))):
                tl.thread.frombytes(local)
            else:
                tl.thread.extend(map(remap.__getitem__, array("q", local)))
            if not total_ok:
                all_totals[tl.device] = False
            tl.total.frombytes(total)
            tl.reserved.frombytes(reserved)
    for dev, tl in out.items():
        if not all_totals[dev]:
            tl.total = None  # a running sum is the only consistent curve then
        tl.finish()
    return out


def _add_events(memory: list[Event], timeline, thread, all_totals: dict[str, bool]) -> None:
    """Decoded [memory] Events into their devices' timelines (what memory_columns does for records)."""
    for e in memory:
        a = e.args
        if a is None or not a.nbytes or not -MAX_BYTES < a.nbytes < MAX_BYTES:
            continue  # nothing allocated, or not a real size (it would overflow the columns)
        tl = timeline((a.device_type, a.device_id))
        tl.t.append(e.ts)
        tl.delta.append(int(a.nbytes))
        tl.addr.append((a.addr or 0) & ADDR_MASK)
        tl.stream.append(0)  # the profiler records no stream; an address is reused only once freed
        tl.thread.append(thread(tl, e.pid, e.tid))
        if a.total_allocated is None or not -MAX_BYTES < a.total_allocated < MAX_BYTES:
            all_totals[tl.device] = False
            tl.total.append(0)
        else:
            tl.total.append(int(a.total_allocated))
        r = a.total_reserved or 0
        tl.reserved.append(r if -MAX_BYTES < r < MAX_BYTES else 0)


def main_device(tls: dict[str, Timeline]) -> str | None:
    """The device whose memory the report is about: the accelerator with the highest peak, else the CPU."""
    if not tls:
        return None
    gpus = [d for d in tls if d != "cpu"]
    pool = gpus or list(tls)
    return max(pool, key=lambda d: max(tls[d].live) if len(tls[d].live) else 0)
