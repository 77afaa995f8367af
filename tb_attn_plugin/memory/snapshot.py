"""CUDA caching-allocator snapshots (``torch.cuda.memory._dump_snapshot``) as Timelines and churn.

Every field but ``device_traces`` entries' ``action`` and ``size`` is optional: older releases lack
``external_annotations``, ``allocator_settings``, ``time_us``, ``stream`` or ``frames``, and newer
ones add fields that are ignored here.
"""

from __future__ import annotations

from array import array
from typing import Any

import msgspec

from ..format.errors import TraceError
from . import fast_pickle
from .rows import NOT_DICT, NOT_STR, EntryRows, from_dicts
from .safe_pickle import load_plain
from .timeline import Timeline

ALLOC = "alloc"
FREES = ("free_completed", "free_requested", "free")  # the first one a trace records is the free
SEGMENT_GROW = ("segment_alloc", "segment_map")
SEGMENT_SHRINK = ("segment_free", "segment_unmap")
MAX_DEVICES = 4096  # device_traces: one per device torch.cuda sees (a node has 8-16; an NVL72 rack 72)
MAX_TIME_US = 1e17  # as for trace events: beyond ~3000 years of microseconds is not a time stamp
LIVE_STATES = ("active_allocated", "active_pending_free", "active_awaiting_free")


class Annotation(msgspec.Struct):
    name: str
    start_us: float
    end_us: float
    device: int


class DeviceRecord(msgspec.Struct):
    timeline: Timeline
    entry: array  # timeline event -> index into the device's entries (for frames)
    rows: EntryRows  # the entries, kept for the frames of the few blocks a report names
    churn: dict[str, Any]
    time_basis: str  # "us" (time_us) or "index" (a release that records no time)


class Snapshot(msgspec.Struct):
    path: str
    devices: dict[int, DeviceRecord]
    annotations: list[Annotation] = msgspec.field(default_factory=list)
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    segments: int = 0
    entries: int = 0


def load(path: str) -> Snapshot:
    """Load and parse a snapshot pickle; TraceError for anything that is not one. The C decoder
    reads it when it can (entries straight into columns), else the plain unpickler."""
    fast = fast_pickle.load(path)
    if fast is not None:
        return parse(*fast, path=path)
    return parse(load_plain(path), path=path)


def parse(doc: Any, rows: dict[int, EntryRows] | None = None, *, path: str) -> Snapshot:
    """The Snapshot of an unpickled document; ``rows``: its device traces' entries as columns,
    when the C decoder read them (the document's device traces are then empty)."""
    if not isinstance(doc, dict) or not ("device_traces" in doc or "segments" in doc):
        what = type(doc).__name__
        raise TraceError(path, f"a pickle, but not a CUDA memory snapshot (a {what} without 'segments' and "
                               "'device_traces'; write one with torch.cuda.memory._dump_snapshot)")
    traces = doc.get("device_traces")
    if traces is None:
        traces = []
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise TraceError(path, "snapshot's 'device_traces' is not a list of lists of entries")
    if len(traces) > MAX_DEVICES:
        raise TraceError(path, f"snapshot has {len(traces)} device traces; torch writes one per visible device "
                               f"(refused past {MAX_DEVICES}: each costs a timeline)")
    segments = doc.get("segments") or []
    if not isinstance(segments, list):
        raise TraceError(path, "snapshot's 'segments' is not a list")
    # torch builds one dict per entry, segment and block (torch/csrc/cuda/Module.cpp's
    # _cuda_memorySnapshot); a pickle reference reused would cost a whole walk for 2 bytes, so the
    # work of a file that shares them would grow with the square of its size.
    _each_once(path, traces, "device trace")
    _each_once(path, (e for t in traces for e in t if type(e) is dict), "trace entry")
    _each_once(path, segments, "segment")
    _each_once(path, (s.get("blocks") for s in segments if type(s) is dict and type(s.get("blocks")) is list),
               "segment's list of blocks")
    end_alloc, end_reserved = _segment_totals(segments)
    devices: dict[int, DeviceRecord] = {}
    total = 0
    for dev, entries in enumerate(traces):
        r = rows.get(dev) if rows is not None else (from_dicts(entries) if entries else None)
        if not r:
            continue
        total += len(r)
        try:
            devices[dev] = _device(dev, r, end_alloc.get(dev), end_reserved.get(dev))
        except OverflowError:
            raise TraceError(path, f"device {dev}'s sizes add up beyond any real memory (over 2**63 bytes)") from None
    if total == 0:
        raise TraceError(path, "snapshot has no allocation history (device_traces is empty): record it with "
                               "torch.cuda.memory._record_memory_history() before the steps, or "
                               "tb_attn_plugin.profile(..., memory=True)")
    settings = doc.get("allocator_settings")
    return Snapshot(path, devices, _annotations(doc.get("external_annotations")),
                    settings if isinstance(settings, dict) else {}, len(segments), total)


def _each_once(path: str, items, what: str) -> None:
    """TraceError when one container object appears twice among ``items`` (a shared pickle reference)."""
    seen: set[int] = set()
    add = seen.add
    n = 0
    for x in items:
        add(id(x))
        n += 1
        if len(seen) != n:
            raise TraceError(path, f"refused: one {what} referenced more than once (a snapshot torch writes "
                                   "holds each once)")


def _segment_totals(segments: list) -> tuple[dict[int, int], dict[int, int]]:
    """Per device: bytes of live blocks and bytes reserved when the snapshot was taken."""
    alloc: dict[int, int] = {}
    reserved: dict[int, int] = {}
    for s in segments:
        if not isinstance(s, dict):
            continue
        dev = _int(s.get("device"))
        reserved[dev] = reserved.get(dev, 0) + _int(s.get("total_size"))
        blocks = s.get("blocks")
        if isinstance(blocks, list):
            alloc[dev] = alloc.get(dev, 0) + sum(_int(b.get("size")) for b in blocks
                                                 if isinstance(b, dict) and b.get("state") in LIVE_STATES)
        else:
            alloc[dev] = alloc.get(dev, 0) + _int(s.get("allocated_size"))
    return alloc, reserved


MAX_BYTES = 1 << 56  # 64 PiB: a larger size or count is not a real one (and would overflow the columns)


def _int(v) -> int:
    return v if type(v) is int and -MAX_BYTES < v < MAX_BYTES else 0


def _present(rows: EntryRows) -> set[str]:
    """The kinds of action a device records (the first 13 met, as a list of entries is read)."""
    codes = set(rows.action)
    codes.discard(NOT_STR)
    codes.discard(NOT_DICT)
    if len(codes) <= 13:
        return {rows.actions[c] for c in codes}
    seen: dict[int, None] = {}
    for c in rows.action:
        if c >= 0:
            seen[c] = None
            if len(seen) > 12:
                break
    return {rows.actions[c] for c in seen}


def _device(dev: int, rows: EntryRows, end_alloc: int | None, end_reserved: int | None) -> DeviceRecord:
    names = rows.actions
    present = _present(rows)
    free_action = next((a for a in FREES if a in present), "free_completed")
    code = {a: i for i, a in enumerate(names)}
    alloc_c, free_c = code.get(ALLOC, -99), code.get(free_action, -99)
    kinds = rows.time_kind
    has_time = any(kinds[i] for i in range(min(64, len(rows))))
    tl = Timeline(f"cuda:{dev}", reserved=array("q"))
    t_col, d_col, a_col, s_col, r_col = tl.t, tl.delta, tl.addr, tl.stream, tl.reserved
    entry_ix = array("q")
    churn = {"segment_allocs": 0, "segment_frees": 0, "segment_maps": 0, "segment_unmaps": 0, "flush_retries": 0,
             "ooms": [], "skipped_entries": 0}
    skipped = 0
    reserved = 0
    last_time = 0.0
    prev_action = NOT_STR  # the code of the last entry read (flush retries follow a segment free)
    # The hot loop of a million-entry snapshot: columns zipped, locals only. A NaN time fails
    # every comparison, so a missing or mistyped one takes the last time (the record's order is
    # the truth; times only ever move forward).
    for i, (c, size, tu, addr, stream) in enumerate(zip(rows.action, rows.size, rows.time_us, rows.addr,
                                                        rows.stream)):
        if c == NOT_DICT:
            skipped += 1
            continue
        if c == alloc_c or c == free_c:
            if not 0 < size < MAX_BYTES:
                skipped += 1
                continue
            if not has_time:
                tu = i
            if not last_time <= tu < MAX_TIME_US:
                tu = last_time
            last_time = tu
            t_col.append(tu)
            d_col.append(size if c == alloc_c else -size)
            a_col.append(addr)
            s_col.append(stream if -MAX_BYTES < stream < MAX_BYTES else 0)
            r_col.append(reserved)
            entry_ix.append(i)
            prev_action = c
            continue
        action = names[c] if c >= 0 else None
        size = size if -MAX_BYTES < size < MAX_BYTES else 0
        if not has_time:
            tu = i
        if not last_time <= tu < MAX_TIME_US:
            tu = last_time
        if action in SEGMENT_GROW:
            reserved += size
            churn["segment_allocs" if action == "segment_alloc" else "segment_maps"] += 1
            if prev_action >= 0 and names[prev_action] in SEGMENT_SHRINK and action == "segment_alloc":
                churn["flush_retries"] += 1  # cached segments released to satisfy this allocation
        elif action in SEGMENT_SHRINK:
            reserved -= size
            churn["segment_frees" if action == "segment_free" else "segment_unmaps"] += 1
        elif action == "oom":
            free = rows.device_free[i]
            churn["ooms"].append({"time_us": float(tu), "bytes": size,
                                  "device_free": free if -MAX_BYTES < free < MAX_BYTES else 0, "entry": i})
        prev_action = c
    churn["skipped_entries"] = skipped
    tl.thread = array("q", [-1]) * len(t_col)
    # The trace is a ring buffer of the latest entries: what was live and reserved before its first
    # entry is what the segments held at the end minus what the entries added.
    net = sum(d_col)
    base = (end_alloc - net) if end_alloc is not None else 0
    running, low = base, base
    for d in d_col:
        running += d
        if running < low:
            low = running
    tl.base = base - min(0, low)  # never below zero, whatever the record lacks
    r_base = (end_reserved - reserved) if end_reserved is not None else 0
    r_low = min(r_col) + r_base if len(r_col) else 0
    r_base -= min(0, r_low)
    for k in range(len(r_col)):
        r_col[k] += r_base
    _finish_in_order(tl)
    return DeviceRecord(tl, entry_ix, rows, churn, "us" if has_time else "index")


def _finish_in_order(tl: Timeline) -> None:
    """Entries are already in time order: pair and compute live without re-sorting (the time stamps
    of one microsecond may tie, and the record's order is the truth)."""
    tl._pair()
    tl._live()


def _annotations(raw: Any) -> list[Annotation]:
    """record_function START/END marks as spans (unmatched ones are dropped)."""
    if not isinstance(raw, list):
        return []
    open_: dict[tuple[str, int], list[float]] = {}
    out: list[Annotation] = []
    for a in raw:
        if not isinstance(a, dict):
            continue
        name, stage, tu = a.get("name"), a.get("stage"), a.get("time_us")
        if not isinstance(name, str) or type(tu) not in (int, float) or not -MAX_TIME_US < tu < MAX_TIME_US:
            continue
        dev = _int(a.get("device"))
        if stage == "START":
            open_.setdefault((name, dev), []).append(float(tu))
        elif stage == "END":
            starts = open_.get((name, dev))
            if starts:
                out.append(Annotation(name, starts.pop(), float(tu), dev))
    out.sort(key=lambda s: (s.start_us, -s.end_us))
    return out
