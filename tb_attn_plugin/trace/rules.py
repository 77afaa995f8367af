"""What the analysis keeps of a trace's events, in the terms the C scanner is given them: the categories
of each list, the args members read (Shapes, Args), the plausible times, the text per chunk. Free of
numpy (msgspec only), so the command line can start reading and scanning a trace (stream.start) while
the engine, numpy with it, is still importing. events.py decodes by these rules.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

NULL = msgspec.Raw(b"null")
_any_decoder = msgspec.json.Decoder()


def _lazy(raw: msgspec.Raw) -> Any:
    if raw is NULL:
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

    dims_raw: msgspec.Raw = msgspec.field(default=NULL, name="Input Dims")
    types_raw: msgspec.Raw = msgspec.field(default=NULL, name="Input type")
    concrete_raw: msgspec.Raw = msgspec.field(default=NULL, name="Concrete Inputs")
    strides_raw: msgspec.Raw = msgspec.field(default=NULL, name="Input Strides")  # why_not_flash reads SDPA's

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
    # A kernel's launch as CUPTI writes it (attention/occupancy.py reads them). Any: a mistyped value in
    # one of them never costs the kernel; the reader checks the types.
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    block: Any = None
    achieved_occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")


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
