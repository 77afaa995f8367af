"""A public CUDA memory snapshot the project never used (issue 45, "Done when": memory shares exact on
unseen files): ``torch.cuda.memory._dump_snapshot`` output of a CS336 assignment's Transformer LM (the
"medium" size, 24 layers, context 1024, forward only, bf16 autocast) from Wedsonlin/assignment2-systems
(tests/fixtures/public/README.md names repository, path, commit, licence). Its attention is course code,
hand-written: ``scaled_dot_product_attention`` (einsum QKᵀ / √d, masked where, softmax, einsum AV) called by
``CausalMultiHeadSelfAttention.forward`` (q/k/v projections, RoPE, causal mask, output projection).

The walker here decodes the pickle with an unpickler that refuses every global (a snapshot is plain data;
the engine has its own decoder and never unpickles), replays the allocations to the peak of allocated bytes
(the ring's start is what the segments held at the end less what the entries added), and counts as attention
the live blocks whose Python frames are in ``scaled_dot_product_attention`` or in the lines of
``CausalMultiHeadSelfAttention.forward`` (480-528 of cs336_basics/model.py at the fixture's commit).

The block's ``x + self.attn(self.ln1(x))`` calls RMSNorm.forward and the attention's forward, both
``forward`` of one file, from one line: the pre-attention norm's output (16 MiB, live at the peak) is not
attention's, although a stack key (file, name, callers) cannot tell the two functions apart."""

from __future__ import annotations

import pickle
from pathlib import Path

from tb_attn_plugin.memory.engine import snapshot_report

SNAPSHOT = Path(__file__).parent / "fixtures" / "public" / "cs336_medium_1024_inference_memory_snapshot.pickle"
MODEL_PY = "cs336_basics/model.py"
ATTENTION_FORWARD = range(480, 529)  # CausalMultiHeadSelfAttention.forward, def to return
Q_PROJ_LINE = 494  # Q = self.q_proj(x): one allocation per call


class _PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a snapshot holds plain data, not {module}.{name}")


def _attention_frame(block: dict) -> bool:
    return any(f["filename"].endswith(MODEL_PY) and (f["name"] == "scaled_dot_product_attention" or
               (f["name"] == "forward" and f["line"] in ATTENTION_FORWARD)) for f in block.get("frames") or ())


def _walk(path: Path) -> tuple[int, dict[int, dict], int]:
    """(peak allocated bytes, the traced blocks live then by address, attention calls)."""
    with open(path, "rb") as f:
        snap = _PlainData(f).load()
    trace = snap["device_traces"][0]
    actions = {e["action"] for e in trace}
    free = next(a for a in ("free_completed", "free_requested", "free") if a in actions)
    events = [e for e in trace if e["action"] in ("alloc", free)]
    deltas = [e["size"] if e["action"] == "alloc" else -e["size"] for e in events]
    running = sum(s["allocated_size"] for s in snap["segments"] if s.get("device", 0) == 0) - sum(deltas)
    best, at = -1, -1
    for i, d in enumerate(deltas):
        running += d
        if running > best:
            best, at = running, i
    live: dict[int, dict] = {}
    for e in events[:at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        else:
            live.pop(e["addr"], None)
    calls = sum(1 for e in events if e["action"] == "alloc" and any(
        f["filename"].endswith(MODEL_PY) and f["name"] == "forward" and f["line"] == Q_PROJ_LINE
        for f in e.get("frames") or ()))
    return best, live, calls


def test_public_snapshot_attention_share():
    peak, live, calls = _walk(SNAPSHOT)
    attention = sum(e["size"] for e in live.values() if _attention_frame(e))
    assert (peak, attention, calls) == (2_879_401_984, 1_125_392_384, 24)  # the walker's own count, pinned
    m = snapshot_report(str(SNAPSHOT))["memory"]
    p = m["peak"]
    assert p["bytes"] == peak and p["attention_bytes"] == attention
    assert p["attention_share"] == round(attention / peak, 4)
    assert len(m["calls"]) == calls  # one call per CausalMultiHeadSelfAttention.forward, 24 layers
