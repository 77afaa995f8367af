"""Multi-kernel attention calls: the helper kernels of one invocation join the call of its attention kernel.

Serving and quantized attention runs several kernels per call: a KV-cache write or a quantize kernel
before the attention kernel, a split-KV combine/reduce kernel after it, a preprocess/postprocess
kernel around a backward kernel (their families have a HELPER_STAGES stage in patterns.py). When
an op launches them all, the op already makes them one call. Under CUDA/HIP graph replay, or in a
compiled region where every Triton kernel has an op of its own, nothing but the stream order ties
them together: a helper that belongs to no call joins the attention kernel next to it on the same
GPU stream (the next one for helpers that run before attention, the previous one for those after),
looking past at most MAX_GAP unrelated kernels, and never past another attention kernel. The call
count is then the number of invocations, not of kernels.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from ..trace.link import Kernel, Linked
from . import patterns as P

AFTER_ATTENTION = frozenset({"split_kv_reduce", "postprocess"})
MAX_GAP = 6  # unrelated kernels (a mean, a copy) allowed between a helper and its attention kernel


def attach_helpers(L: Linked, calls: Sequence, op_call: Sequence[int]) -> int:
    """Add each unattached helper kernel to its call's ``kernels`` (``calls``: detect's Calls, each with
    ``id`` and ``kernels``; ``op_call``: each op's call id, -1 none); returns how many were attached."""
    kernel_call: dict[int, int] = {id(k): c.id for c in calls for k in c.kernels}

    def call_of(k: Kernel) -> int:
        if k.op >= 0 and op_call[k.op] >= 0:
            return op_call[k.op]
        return kernel_call.get(id(k), -1)

    if not any(P.helper_family(nm) is not None for nm in L.kernel_names.values):
        return 0  # most traces: nothing to group, no sorting
    streams: defaultdict[tuple, list[Kernel]] = defaultdict(list)
    for k in L.kernels:
        streams[(str(k.pid), str(k.tid))].append(k)
    attached = 0
    for ks in streams.values():
        ks.sort(key=lambda k: k.ts)
        for i, k in enumerate(ks):
            fam = P.helper_family(k.name)
            if fam is None or call_of(k) >= 0:
                continue
            c = _neighbour_call(ks, i, -1 if fam.stage in AFTER_ATTENTION else 1, call_of)
            if c < 0:
                continue
            call = calls[c]
            call.kernels.append(k)
            kernel_call[id(k)] = c
            call.start = min(call.start, k.ts)
            call.end = max(call.end, k.ts + k.dur)
            attached += 1
    return attached


def _neighbour_call(ks: list[Kernel], i: int, step: int, call_of) -> int:
    """The call of the nearest attention kernel from ``ks[i]`` in direction ``step``, or -1."""
    gap = 0
    j = i + step
    while 0 <= j < len(ks):
        name = ks[j].name
        if P.fused_family(name) is not None:
            return call_of(ks[j])
        if P.helper_family(name) is None:
            gap += 1
            if gap > MAX_GAP:
                return -1
        j += step
    return -1
