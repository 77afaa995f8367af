"""Snapshots whose attention no frame names: found by what a function allocates (QK^T, a softmax
of its size, AV; memory/structure.py), the attention module's own blocks counted, and one call per
invocation, forward and backward (compiled or not) together. Every expected number is re-derived
here from the fixture's entries by a walker of this file's own, never by the engine's code."""

from __future__ import annotations

import pickle

import pytest

from tb_attn_plugin.memory import engine, text
from tests import memory_snapshots as M


def _report(tmp_path, doc):
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(doc))
    return engine.snapshot_report(str(p))


def _peak_blocks(doc):
    """Replay device 0's entries (an alloc adds, its free_completed removes): (peak bytes, the blocks
    live then). The first moment of the largest total, as the report's peak."""
    live, total, best, at_best = {}, 0, -1, []
    for e in doc["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
            total += e["size"]
        elif e["action"] == "free_completed":
            total -= live.pop(e["addr"])["size"]
        else:
            continue
        if total > best:
            best, at_best = total, list(live.values())
    return best, at_best


def _in_function(e, filename, lines, name="forward"):
    """Whether entry ``e`` was allocated inside function ``name`` of ``filename`` at ``lines``."""
    return any(f["filename"] == filename and f["name"] == name and lines[0] <= f["line"] <= lines[1]
               for f in e["frames"])


def _names(e):
    return [f["name"] for f in e["frames"]]


def _forward_allocs(doc, op):
    """Allocations whose frames hold ATen op ``op`` (its C++ frame) and no backward: no autograd node, no
    compiled backward."""
    out = []
    for e in doc["device_traces"][0]:
        if e["action"] != "alloc":
            continue
        names = _names(e)
        if any(n.startswith(f"at::_ops::{op}::call") for n in names) and \
                not any("Backward" in n or n == "_backward_impl" for n in names):
            out.append(e)
    return out


@pytest.mark.parametrize("backward", [False, True])
def test_attention_in_a_vendored_model_py_where_every_function_is_forward(tmp_path, backward):
    """nanoGPT's CausalSelfAttention.forward: no frame says attention. The peak's attention share is
    the bytes of the blocks allocated inside that function, of the peak; never None or 0."""
    doc, want = M.nanogpt_training(backward=backward)
    mem = _report(tmp_path, doc)["memory"]
    peak, blocks = _peak_blocks(doc)
    # In this fixture's backward every node of these kinds differentiates an op of the attention
    # function (the MLP's and the projections' nodes are MmBackward0).
    att_nodes = ("BmmBackward0", "NativeDropoutBackward0", "SoftmaxBackward0", "MaskedFillBackward0", "MulBackward0")
    att = sum(e["size"] for e in blocks if _in_function(e, want["file"], want["lines"]) or
              any(f"::{k}::apply" in n for k in att_nodes for n in _names(e)))
    assert mem["peak"]["bytes"] == peak and att > 0
    assert mem["peak"]["attention_share"] == round(att / peak, 4)
    assert mem["attribution"]["by"] == "frames"
    site = mem["attribution"]["structure_sites"]
    assert site == ["model.py:forward called at model.py:161"] and mem["attribution"]["sites"] == site
    # RMSNorm.forward is also "forward" in model.py, called from the same line: its blocks are not attention's.
    norm = sum(e["size"] for e in doc["device_traces"][0] if e["action"] == "alloc" and
               _in_function(e, want["file"], (37, 38)))
    fwd = sum(c["bytes_allocated"] - c["bwd_bytes_allocated"] for c in mem["calls"])
    mine = sum(e["size"] for e in doc["device_traces"][0] if e["action"] == "alloc" and
               _in_function(e, want["file"], want["lines"]) and not any("Backward" in n for n in _names(e)))
    assert fwd == mine and norm > 0
    # Its stages come from the ops: QK^T before the softmax, AV after, the projections around them.
    stages = {s["stage"] for s in mem["layers"][0]["stages"] if s["pass"] == "fwd"}
    assert {"qkv_proj", "qk_matmul", "scale_mask", "softmax", "dropout", "av_matmul", "out_proj"} <= stages
    out = text.render_snapshot_report(_report(tmp_path, doc))
    assert "attention: unknown" not in out and "1 found by what they allocate" in out


@pytest.mark.parametrize("make,softmax_op", [("nanogpt_training", "_softmax"), ("llama_training_step", "_softmax")])
def test_a_training_snapshot_counts_one_call_per_invocation(tmp_path, make, softmax_op):
    """Forward and backward of N layers are N calls (each with its backward bytes), as in traces."""
    doc, _ = getattr(M, make)(layers=3)
    mem = _report(tmp_path, doc)["memory"]
    n = len(_forward_allocs(doc, softmax_op))
    assert n == 3 and len(mem["calls"]) == n
    assert all(c["bwd_bytes_allocated"] > 0 for c in mem["calls"])
    assert sum(lay["calls"] for lay in mem["layers"]) == n


def test_a_compiled_backward_joins_its_forward_calls(tmp_path):
    """Inductor's backward under _backward_impl, carrying the forward's source frames: not new
    forward calls; each layer's gradients join the call of the forward they differentiate."""
    doc, want = M.llama_compiled_backward(layers=3)
    mem = _report(tmp_path, doc)["memory"]
    n = len(_forward_allocs(doc, "_softmax"))
    assert n == 3 and len(mem["calls"]) == n
    compiled = [e for e in doc["device_traces"][0] if e["action"] == "alloc" and "_backward_impl" in _names(e)]
    per_layer = sum(e["size"] for e in compiled) // n
    assert [c["bwd_bytes_allocated"] for c in mem["calls"]] == [per_layer] * n
    # Inductor's blocks have no op frame: each takes the stage of the forward line it differentiates.
    assert {(s["stage"], s["pass"]) for s in mem["stages"]} >= {("av_matmul", "bwd"), ("softmax", "bwd"),
                                                                ("qk_matmul", "bwd")}
    # The course-code model (found by structure): its compiled backward is no forward call either,
    # and the blocks it writes under the attention function's source lines join its calls.
    doc, want = M.nanogpt_training(compiled_backward=True)
    mem = _report(tmp_path, doc)["memory"]
    assert len(mem["calls"]) == len(_forward_allocs(doc, "_softmax")) == want["layers"]
    compiled = [e for e in doc["device_traces"][0] if e["action"] == "alloc" and "_backward_impl" in _names(e)
                and _in_function(e, want["file"], want["lines"])]
    assert [c["bwd_bytes_allocated"] for c in mem["calls"]] == [sum(e["size"] for e in compiled) // want["layers"]] * 3


def test_fused_sdpa_gqa_training_counts_the_attention_modules_own_blocks(tmp_path):
    """LlamaSdpaAttention with repeat_kv and LoRA: the q/k/v projections (their LoRA parts), the
    rotary outputs, the repeated K/V, SDPA's output and logsumexp, the head merge and o_proj are all
    attention's; the peak (in the backward of the fused kernel) says so."""
    doc, want = M.llama_sdpa_gqa_lora_training()
    mem = _report(tmp_path, doc)["memory"]
    peak, blocks = _peak_blocks(doc)
    att = sum(e["size"] for e in blocks
              if _in_function(e, want["file"], want["lines"]) or
              any("ScaledDotProductEfficientAttentionBackward0" in n for n in _names(e)))
    assert mem["peak"]["bytes"] == peak
    assert mem["peak"]["attention_share"] == round(att / peak, 4)
    assert mem["peak"]["pass"] == "bwd" and "(backward)" in mem["peak"]["explanation"]
    assert len(mem["calls"]) == want["layers"] and mem["attribution"]["gqa_layers"] == [want["layer"]]
    fwd_mine = sum(e["size"] for e in doc["device_traces"][0] if e["action"] == "alloc" and
                   _in_function(e, want["file"], want["lines"]))
    assert sum(c["bytes_allocated"] - c["bwd_bytes_allocated"] for c in mem["calls"]) == fwd_mine
    stages = {(s["stage"], s["pass"]) for s in mem["stages"]}
    assert {("qkv_proj", "fwd"), ("other", "fwd"), ("fused", "fwd"), ("out_proj", "fwd"), ("fused", "bwd")} <= stages


def test_mqa_named_from_kv_projections_of_fewer_heads_and_score_blocks_by_role(tmp_path):
    """Course-code MQA (K and V projected to one head, broadcast inside matmul, no repeat frame):
    named MQA/GQA; the score blocks are those the score ops made (QK^T, the scale, the softmax),
    not K's broadcast copy, the projections or AV's output."""
    doc, want = M.course_mqa()
    mem = _report(tmp_path, doc)["memory"]
    site = mem["attribution"]["sites"]
    assert mem["attribution"]["gqa_layers"] == site and len(site) == 1
    made_by_score_ops = [e for op in ("bmm", "div_Tensor", "_softmax") for e in _forward_allocs(doc, op)
                         if e["size"] == want["score"]]
    assert mem["score_matrix"]["blocks"] == len(made_by_score_ops) == 3 * want["calls"]
    assert "MQA/GQA" in text.render_snapshot_report(_report(tmp_path, doc))


def test_python_stacks_only_still_find_attention_by_structure(tmp_path):
    """stacks="python" (no C++ frames): ``q @ k.T`` and ``att @ v`` leave no op frame, F.softmax
    does; the function is still found, and the score blocks are the softmax's and dropout's only
    (the ops the record names), never a block merely of the score's size."""
    doc, want = M.nanogpt_training(backward=False)
    for e in doc["device_traces"][0]:
        e["frames"] = [f for f in e["frames"] if f["filename"].endswith(".py")]
    mem = _report(tmp_path, doc)["memory"]
    peak, blocks = _peak_blocks(doc)
    att = sum(e["size"] for e in blocks if _in_function(e, want["file"], want["lines"]))
    assert mem["peak"]["attention_share"] == round(att / peak, 4) and att > 0
    assert mem["attribution"]["structure_sites"] == ["model.py:forward called at model.py:161"]
    # The score path's lines (q @ k.T at 100 to att @ v at 107): its F.softmax and attn_dropout; not
    # resid_dropout at 111, whose blocks are not the score's.
    named = [e for e in doc["device_traces"][0] if e["action"] == "alloc" and _in_function(e, want["file"], (100, 107))
             and any(f["filename"].endswith("functional.py") and f["name"] in ("softmax", "dropout")
                     for f in e["frames"])]
    assert mem["score_matrix"]["blocks"] == len(named) == 3 * want["layers"]  # softmax, dropout output and mask


def test_a_classifier_softmax_between_linears_is_not_attention(tmp_path):
    """Negative control: logits from a Linear, F.softmax, then another Linear (a gating MLP) is no
    matmul -> softmax -> matmul: no attention, and the share stays unknown, never 0."""
    h = M.History()
    at = lambda line: [M.py("/home/u/gate.py", line, "forward")] + M.MODULE + [M.py("/home/u/train.py", 9, "step")]
    for _ in range(3):
        a = h.alloc(1 << 20, M._linear(at(12)))
        p = h.alloc(1 << 20, M.GATHER + M.ops("_softmax", "softmax_int") +
                    [M.py(f"{M.TORCH}/nn/functional.py", 2140, "softmax")] + at(13))
        o = h.alloc(1 << 20, M._linear(at(14)))
        ls = h.alloc(1 << 20, M.GATHER + M.ops("_log_softmax", "log_softmax_int") +
                     [M.py(f"{M.TORCH}/nn/functional.py", 2250, "log_softmax")] + at(15))
        for blk in (a, p, o, ls):
            h.free(blk)
    mem = _report(tmp_path, M.framed_snapshot([h]))["memory"]
    assert mem["attribution"]["by"] == "unknown" and mem["peak"]["attention_share"] is None


def test_a_forward_that_loops_over_attention_calls_is_no_attention_module(tmp_path):
    """A whole model written as one function calling eager_attention_forward per layer: its own
    blocks (the MLP between the calls) are not attention's; the cores' blocks still are."""
    fn = "/home/u/llama_in_one_file.py"
    model = [M.py(fn, 40, "forward")] + M.MODULE + [M.py("/home/u/train.py", 9, "step")]
    core = [M.py(M.HF, 190, "eager_attention_forward")] + model
    h = M.History()
    mlp_bytes = 0
    for _ in range(3):
        for blk in (h.alloc(1 << 20, M.GATHER + M.ops("bmm", "matmul") + core),
                    h.alloc(1 << 20, M.GATHER + M.ops("_softmax", "softmax_int") + core),
                    h.alloc(1 << 18, M.GATHER + M.ops("bmm", "matmul") + core)):
            h.free(blk)
        h.free(h.alloc(4 << 20, M._linear([M.py(fn, 44, "forward")] + model[1:])))  # the MLP, inline
        mlp_bytes += 4 << 20
    mem = _report(tmp_path, M.framed_snapshot([h]))["memory"]
    core_bytes = sum(e["size"] for e in h.trace if e["action"] == "alloc" and
                     "eager_attention_forward" in _names(e))
    assert len(mem["calls"]) == 3 and sum(c["bytes_allocated"] for c in mem["calls"]) == core_bytes
    assert mlp_bytes and mem["churn"]["bytes_allocated"] == core_bytes + mlp_bytes
