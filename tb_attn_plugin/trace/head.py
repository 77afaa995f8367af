"""Who wrote a trace and when, read from its first bytes only: rank, host, process and start time.

A trace whose file name lacks ``{worker}.{time_ns}`` (``bert.pt.trace.json.gz``) is named from its
head, as ``torch.profiler.tensorboard_trace_handler`` would have named it. Kineto (torch 2.x) writes,
before ``traceEvents``::

    {"schemaVersion": 1, "deviceProperties": [...], "trace_id": "...",
     "distributedInfo": {"backend": "gloo", "rank": 1, "world_size": 2, ...},
     "host_name": "vm", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1790857026000000000,
     "traceEvents": [{"ph": "M", "name": "process_name", "pid": 11105, "ts": 5637215929386.891, ...

and an event's wall-clock time is ``baseTimeNanoseconds + ts * 1000`` ns. Older kineto (and files
rewritten by other tools, such as TraceLens's) put these keys after the events, where a bounded
read does not reach: those keep the name-based rule, with the reason. Only ``HEAD_BYTES`` of JSON
(``RAW_BYTES`` of gzip) are read, so a listing never parses a GB file; nothing here raises.
"""

from __future__ import annotations

import json
import math
import re
import zlib

import msgspec

from . import limits

HEAD_BYTES = 256 * 1024  # JSON text read at most (kineto's head: device properties, distributedInfo)
RAW_BYTES = 1024 * 1024  # compressed bytes read at most to inflate HEAD_BYTES
MAX_EVENTS = 256  # events decoded at most from the head
MAX_RANK = 10_000_000

# Event categories that kineto gives the profiled process's own id (GPU rows carry the device's).
CPU_CATEGORIES = frozenset({"cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver",
                            "cpu_instant_event", "fwdbwd"})
# Without baseTimeNanoseconds, old kineto (torch 1.x) wrote microseconds since the epoch: from 2001 on.
EPOCH_US_MIN, EPOCH_US_MAX = 1e15, 1e17
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")  # fullmatch, not "$": no final newline
_EVENTS = re.compile(r'"traceEvents"\s*:\s*\[')
_STEP = re.compile(r"ProfilerStep#(\d{1,9})")


class Head(msgspec.Struct, frozen=True):
    rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    pid: int | None = None
    start_ns: int | None = None  # wall-clock time of the earliest event read, ns since the epoch
    step: int | None = None  # the first ProfilerStep#N read


class NoHead(ValueError):
    """The head names nothing; str() says why, for the listing's note."""


def read_head(path: str) -> str:
    """The first HEAD_BYTES of the trace's JSON text (inflated when gzip). Raises NoHead."""
    try:
        with limits.open_regular(path, 1 << 62) as fh:
            raw = fh.read(RAW_BYTES)
    except Exception as exc:  # gone, unreadable, not a regular file
        raise NoHead(f"cannot read its head: {type(exc).__name__}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
        except zlib.error:
            raw = b""
        if not raw:
            raise NoHead("its gzip head does not inflate") from None
    if not raw:
        raise NoHead("it is empty")
    if not raw[:HEAD_BYTES].strip():
        raise NoHead(f"no traceEvents in its first {HEAD_BYTES // 1024} KiB (blank)")
    return raw[:HEAD_BYTES].decode("utf-8", "ignore")


def parse_head(text: str) -> Head:
    """What the head tells: the keys before ``traceEvents`` and the events read whole. Raises NoHead."""
    m = _EVENTS.search(text)
    if m is None:
        raise NoHead(f"no traceEvents in its first {HEAD_BYTES // 1024} KiB (not a kineto trace, or one "
                     "whose events come last)")
    prelude = text[:m.start()].rstrip().rstrip(",")
    try:
        top = json.loads(prelude + "}")
    except Exception:  # hostile or foreign text, deep nesting (RecursionError) included
        raise NoHead("what precedes traceEvents is not a JSON object's keys") from None
    if not isinstance(top, dict):
        raise NoHead("it is not a JSON object")
    rank, world = _rank(top.get("distributedInfo"))
    host = top.get("host_name")
    host = host if isinstance(host, str) and _HOST.fullmatch(host) else None
    base = top.get("baseTimeNanoseconds")
    base = base if _is_int(base) and 0 < base < 1 << 63 else None
    pid, ts, step = None, None, None
    for e in _events(text, m.end()):
        t = e.get("ts")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0:
            ts = t if ts is None else min(ts, t)
        if pid is None and _is_int(e.get("pid")) and (e.get("cat") in CPU_CATEGORIES or _cpu_label(e)):
            pid = e["pid"]
        if step is None and e.get("ph") == "X" and isinstance(e.get("name"), str):
            s = _STEP.fullmatch(e["name"])
            step = int(s.group(1)) if s else None
    return Head(rank, world, host, pid, _start_ns(base, ts), step)


def name_from_head(head: Head, stem: str) -> tuple[str, str, str]:
    """(worker, span, note): the worker from distributedInfo's rank (``rank{N}``: the same in every
    run of a job), else host_name and pid (``{host}_{pid}``, tensorboard_trace_handler's default); the span
    its start time in ns (digits, ordered as tensorboard_trace_handler's time stamps are); what the
    head lacks comes from the file name (worker ``stem``; span ``stem`` beside a worker from the head,
    else none) and the note says so."""
    if head.rank is not None:
        worker = f"rank{head.rank}"
        said = f"worker from distributedInfo (rank {head.rank}" + (
            f" of {head.world_size})" if head.world_size else ")")
    elif head.host and head.pid is not None:
        worker, said = f"{head.host}_{head.pid}", "worker from host_name and pid (as tensorboard_trace_handler names it)"
    else:
        worker, said = stem, "worker from the file name (the head names no rank, nor host_name and pid)"
    if head.start_ns is not None:
        span, when = str(head.start_ns), "span from the trace's start time" + (
            f" (its steps from ProfilerStep#{head.step})" if head.step is not None else "")
    else:  # a worker named from the head may have several such files: the name tells them apart
        span = "" if worker == stem else stem
        when = (("no span" if worker == stem else "span from the file name")
                + ": the head has no wall-clock time (no baseTimeNanoseconds before the events)")
    return worker, span, f"{said}; {when}"


def identify(path: str, stem: str) -> tuple[str, str, str]:
    """(worker, span, note) of a trace file whose name lacks them; never raises: a head that says
    nothing (or is hostile) gives the name-based rule, (stem, ""), and the reason."""
    try:
        return name_from_head(parse_head(read_head(path)), stem)
    except NoHead as why:
        return stem, "", f"worker and span from the file name: {why}"


def _events(text: str, pos: int):
    """The whole events after ``pos`` (at most MAX_EVENTS); stops at the first cut or broken one."""
    dec = json.JSONDecoder()
    n = len(text)
    for _ in range(MAX_EVENTS):
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n or text[pos] != "{":
            return
        try:
            e, pos = dec.raw_decode(text, pos)
        except Exception:
            return
        if isinstance(e, dict):
            yield e


def _rank(dist) -> tuple[int | None, int | None]:
    if not isinstance(dist, dict):
        return None, None
    rank, world = dist.get("rank"), dist.get("world_size")
    world = world if _is_int(world) and 0 < world <= MAX_RANK else None
    if not (_is_int(rank) and 0 <= rank < MAX_RANK) or (world is not None and rank >= world):
        return None, world
    return rank, world


def _start_ns(base: int | None, ts: float | None) -> int | None:
    if ts is None or ts >= EPOCH_US_MAX:
        return None
    if base is not None:
        ns = base + round(ts * 1000)
    elif EPOCH_US_MIN <= ts < EPOCH_US_MAX:
        ns = round(ts * 1000)
    else:
        return None
    return ns if 0 < ns < 10**19 else None


def _cpu_label(e: dict) -> bool:
    args = e.get("args")
    return e.get("name") == "process_labels" and isinstance(args, dict) and args.get("labels") == "CPU"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
