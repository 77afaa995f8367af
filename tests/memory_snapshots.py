"""Snapshot pickles in the format torch.cuda.memory._dump_snapshot writes (documented fields only),
built by the tests with a known peak, and hostile pickles."""

from __future__ import annotations

import os
import pickle

from tb_attn_plugin.format import tags

B, H, L = 2, 4, 256
SCORE = B * H * L * L * 2  # bf16 score matrix: 1 MiB
BEFORE = 3 << 20  # a block allocated before the ring buffer's first entry, still live at the end
SEGMENT = 20 << 20


def _entry(action, addr, size, t, frames=None, **more):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
         "frames": frames if frames is not None else [{"filename": "/home/u/model.py", "line": 7, "name": "forward"}]}
    e.update(more)
    return e


def known_snapshot() -> tuple[dict, dict]:
    """(snapshot, expected): one tagged eager attention call whose softmax holds two score matrices.
    Live bytes: BEFORE, then +4096 (q), +SCORE (qk), +SCORE (softmax), -SCORE (qk freed), +4096 (av)."""
    call = tags.call_name(layer="model.layers.7.self_attn", impl="eager", b=B, hq=H, hkv=H, lq=L, lk=L, d=64,
                          dtype="bfloat16", causal=False)
    A = 0x7F0000000000
    trace = [
        _entry("segment_alloc", A, SEGMENT, 10),
        _entry("alloc", A + 0x10000, 4096, 11),
        _entry("alloc", A + 0x20000, SCORE, 21),
        _entry("alloc", A + 0x200000, SCORE, 31),  # the peak: BEFORE + 4096 + 2·SCORE
        _entry("free_requested", A + 0x20000, SCORE, 41),
        _entry("free_completed", A + 0x20000, SCORE, 41),
        _entry("alloc", A + 0x20000, 4096, 51),
        _entry("free_requested", A + 0x10000, 4096, 61),
        _entry("free_completed", A + 0x10000, 4096, 61),
        _entry("oom", 0, 1 << 40, 45, device_free=123),
        _entry("segment_free", A + SEGMENT, 2 << 20, 70),
        _entry("segment_alloc", A + SEGMENT, 4 << 20, 71),
    ]
    trace.sort(key=lambda e: e["time_us"])
    ann = [{"name": call, "stage": "START", "device": 0, "time_us": 20},
           {"name": tags.stage_name("qk"), "stage": "START", "device": 0, "time_us": 20},
           {"name": tags.stage_name("qk"), "stage": "END", "device": 0, "time_us": 25},
           {"name": tags.stage_name("softmax"), "stage": "START", "device": 0, "time_us": 30},
           {"name": tags.stage_name("softmax"), "stage": "END", "device": 0, "time_us": 46},
           {"name": call, "stage": "END", "device": 0, "time_us": 50}]
    # At the end: BEFORE and SCORE (softmax output) and 4096 (av) live; 2 MiB more reserved.
    blocks = [{"address": A, "size": BEFORE, "requested_size": BEFORE, "state": "active_allocated", "frames": []},
              {"address": A + 0x200000, "size": SCORE, "requested_size": SCORE, "state": "active_allocated", "frames": []},
              {"address": A + 0x20000, "size": 4096, "requested_size": 4096, "state": "active_allocated", "frames": []},
              {"address": A + 0x30000, "size": SEGMENT - BEFORE - SCORE - 4096, "state": "inactive", "frames": []}]
    segments = [{"device": 0, "address": A, "total_size": SEGMENT + (2 << 20), "allocated_size": 0, "active_size": 0,
                 "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                 "is_expandable": False, "frames": [], "blocks": blocks}]
    snap = {"segments": segments, "device_traces": [trace], "allocator_settings": {"expandable_segments": False},
            "external_annotations": ann}
    expected = {"peak": BEFORE + 4096 + 2 * SCORE, "score": SCORE, "layer": "model.layers.7.self_attn",
                "stage": "softmax", "reserved_at_peak": SEGMENT}
    return snap, expected


class RunsACommand:
    """Unpickling this would run a shell command (the classic __reduce__ attack)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_pickle(marker: str) -> bytes:
    snap, _ = known_snapshot()
    snap["device_traces"][0].append(RunsACommand(marker))
    return pickle.dumps(snap)
