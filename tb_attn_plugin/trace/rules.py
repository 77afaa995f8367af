"""What the analysis keeps of a trace's events, in the terms the C scanner is given them: the categories
of each list, the args members read (Shapes, Args), the plausible times, the text per chunk. Free of
numpy (msgspec only), so the command line can start reading and scanning a trace (stream.start) while
the engine, numpy with it, is still importing. events.py decodes by these rules.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

RAW_NULL = msgspec.Raw(b"null")
_any_decoder = msgspec.json.Decoder()


def _lazy(raw: msgspec.Raw) -> Any:
    if raw is RAW_NULL:
        return None
    try:
        v = _any_decoder.decode(raw)
    except msgspec.DecodeError:
        return None
    return v if isinstance(v, list) else None


class Shapes(msgspec.Struct, gc=False, omit_defaults=True):
    """What an op's args hold beyond its record (table.REC keeps their ints): its inputs' shapes,
    types, concrete values and strides. Stay undecoded views into the text until an op needs them:
    as nested lists they were most of the memory of a trace, and only attention's ops look at them."""

    dims_raw: msgspec.Raw = msgspec.field(default=RAW_NULL, name="Input Dims")
    types_raw: msgspec.Raw = msgspec.field(default=RAW_NULL, name="Input type")
    concrete_raw: msgspec.Raw = msgspec.field(default=RAW_NULL, name="Concrete Inputs")
    strides_raw: msgspec.Raw = msgspec.field(default=RAW_NULL, name="Input Strides")  # why_not_flash reads SDPA's

    @property
    def dims(self) -> list[Any] | None:
        return _lazy(self.dims_raw)

    @property
    def types(self) -> list[Any] | None:
        return _lazy(self.types_raw)

    @property
    def concrete(self) -> list[Any] | None:
        return _lazy(self.concrete_raw)

    @property
    def strides(self) -> list[Any] | None:
        return _lazy(self.strides_raw)


class Args(Shapes, gc=False, omit_defaults=True):
    """An event's args as the analysis reads them: the shapes, the ints the scanner's records hold
    too, and a kernel's launch configuration."""

    external_id: int | None = msgspec.field(default=None, name="External id")
    correlation: int | None = None
    seq: int | None = msgspec.field(default=None, name="Sequence number")
    fwd_tid: int | None = msgspec.field(default=None, name="Fwd thread id")
    device: int | None = None
    stream: int | None = None
    nbytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    # The rest of a [memory] instant's args (memory/profiler_events.py reads them).
    addr: int | None = msgspec.field(default=None, name="Addr")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    # A kernel's launch as CUPTI writes it (reading/occupancy.py reads them). Any: a mistyped value in
    # one of them never costs the kernel; the reader checks the types.
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    block: Any = None
    achieved_occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    grid: Any = None


# Categories kept. Kernels, memcpy/memset and launches carry GPU time; cpu ops, annotations and
# module scopes form the op tree; fwdbwd flows join backward to forward; [memory] instants give
# allocations per call.
CPU_CATS = frozenset({"cpu_op", "user_annotation", "Operator", "operator"})
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "runtime", "Driver"})
GPU_CATS = frozenset({"kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})
MODULE_PREFIX = "nn.Module: "
PYTHON_CAT = "python_function"
MEMORY_NAME = "[memory]"
# The list each category's events may join; any other category only as [memory] instants.
TARGET = ({c: "ops" for c in CPU_CATS | {PYTHON_CAT}} | {c: "gpu" for c in GPU_CATS}
           | {c: "launches" for c in LAUNCH_CATS} | {"fwdbwd": "flows"})
# The categories the scanner's records number (Rec.cat): each list's, sorted, as ROUTE passes them, then Python frames.
ROUTE_CATS = tuple(tuple(sorted(cats)) for cats in (CPU_CATS, GPU_CATS, LAUNCH_CATS, {"fwdbwd"}))
CATS = tuple(c for cats in ROUTE_CATS for c in cats) + (PYTHON_CAT,)

MAX_TS = 1e17  # µs; kineto's are ~1e12..1e16 (relative or since the epoch)
MAX_DUR = 1e13  # µs, about 116 days
# Text per scanned (or decoded) chunk. Small enough that the decoding thread's last chunk, which
# nothing overlaps, is short, and that the chunks waiting between threads hold little memory.
CHUNK_BYTES = 1 << 20

# What events._Kept.add keeps, in the C scanner's terms: these categories always; Python frames only for
# nn.Module scopes; any other category only as [memory] instants. The scanner keeps whatever it
# cannot judge from the raw text, and events._Kept.add applies the full rules (ph, sane times) after it.
PREFILTER_RULES = (
    tuple(c.encode() for c in sorted(CPU_CATS | LAUNCH_CATS | GPU_CATS | {"fwdbwd"})),
    PYTHON_CAT.encode(), MODULE_PREFIX.encode(), MEMORY_NAME.encode(),
)


# The same rules in full (scan_events' route): the categories of each list, and the time checks of
# events._Kept._sane, which the scanner applies to every event it routes (and writes a record of).
ROUTE = tuple(tuple(c.encode() for c in cats) for cats in ROUTE_CATS) + (MAX_TS, MAX_DUR)

# The scanner's slimming (scan_events' slim): the args members Args declares, and of those the shapes,
# which an op keeps only when keep_shapes wants them (events._Kept.slim adds the names it said no to).
ARG_KEYS = tuple(f.encode_name.encode() for f in msgspec.structs.fields(Args))
SHAPE_KEYS = tuple(f.encode_name.encode() for f in msgspec.structs.fields(Args)
                    if f.name in ("dims_raw", "types_raw", "concrete_raw", "strides_raw"))

EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


# The scanner's record (table.REC, Rec in _scanner.c): times, thread, category, then Args' int members
# in this order (the scanner's INT_KEYS, by their Args names), then a word of bits (nulls).
INT_ARGS = ("external_id", "correlation", "seq", "fwd_tid", "device", "stream", "nbytes", "total_allocated",
            "device_type", "addr", "total_reserved", "device_id")
NULLS_WORD = 5 + len(INT_ARGS)  # the record's nulls, as its int64 word at this index
NULL = {a: 1 << k for k, a in enumerate(INT_ARGS)}  # nulls: the bit of each arg absent or null
NO_ARGS = 1 << len(INT_ARGS)  # nulls: the event has no args object
SHAPES = NO_ARGS << 1  # a record's nulls: its args hold shape members (ShapesWanted's hint; no column keeps it)
JSON = NO_ARGS << 2  # an op's or launch's nulls: the scanner wrote its JSON too (the rest were only records and names)


class ShapesWanted:
    """Which ops keep their shapes: keep_shapes(name), asked once per name and only about names of
    ops seen holding shapes (a long trace's ProfilerStep#N names never are), and the scanner's slim
    rules that follow (Args' members; no shapes for the names refused). The scanning thread of a
    reading begun early (stream.start) learns with it until the decoding thread (events._Kept) takes
    it over, so that the windows scanned meanwhile are slimmed too. keep_shapes None: every op."""

    def __init__(self, keep_shapes: Callable[[str], bool] | None):
        self.keep_shapes = keep_shapes
        self._keeps: dict[str, bool] = {}
        # The names refused, encoded as the scanner matches them, appended as they are asked.
        self._drop: list[bytes] = []
        self._slim = (ARG_KEYS, SHAPE_KEYS, ())

    def wants(self, name: str) -> bool:
        if self.keep_shapes is None:
            return True
        k = self._keeps.get(name)
        if k is None:
            k = self._keeps[name] = bool(self.keep_shapes(name))
            if not k:
                self._drop.append(name.encode("utf-8", "surrogatepass"))
        return k

    def slim(self) -> tuple:
        """scan_events' slim: what it leaves out of the windows from now on is what the decoding
        thread would drop from them anyway."""
        if len(self._slim[2]) != len(self._drop):
            self._slim = (ARG_KEYS, SHAPE_KEYS, tuple(self._drop))
        return self._slim

    def learn(self, names_json: bytes, op_recs: bytes) -> None:
        """Ask about the ops of one routed chunk that hold shapes (its names array and records),
        without numpy: the scanning thread's part, before the decoding thread has begun."""
        if self.keep_shapes is None or not op_recs:
            return
        nulls = memoryview(op_recs).cast("q")[NULLS_WORD::NULLS_WORD + 1]
        shaped = [i for i, n in enumerate(nulls) if n & SHAPES]
        if shaped:
            names = NAMES_DECODER.decode(names_json)
            for i in shaped:
                self.wants(names[i])


NAMES_DECODER = msgspec.json.Decoder(list[str])  # the scanner's arrays of op and launch names
