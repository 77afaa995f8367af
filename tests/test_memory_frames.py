"""Snapshots without tb-attn annotations, as real users record them: attention found by the
allocations' stack frames (memory/frame_rules.py, memory/stack_attribution.py), by layer and
stage, score blocks counted by the op that made them, and never a confident 0%."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from importlib import resources

import pytest

from tb_attn_plugin.memory import engine, fast_pickle, frame_rules, text
from tests.memory_snapshots import (GATHER, MODULE, TORCH, History, framed_snapshot, hand_written_inference,
                                    known_snapshot, llama_training_step, ops, node, py)


def _report(tmp_path, doc, name="s.pickle", fast=True):
    p = tmp_path / name
    p.write_bytes(pickle.dumps(doc))
    saved = fast_pickle.Decoder
    if not fast:
        fast_pickle.Decoder = None
    try:
        return engine.snapshot_report(str(p)), p
    finally:
        fast_pickle.Decoder = saved


def _stage_rows(mem, layer):
    lay = next(r for r in mem["layers"] if r["layer"] == layer)
    return {(s["stage"], s["pass"]): s for s in lay["stages"]}


def test_training_snapshot_with_cpp_stacks_is_attributed_by_layer_stage_and_pass(tmp_path):
    doc, want = llama_training_step()
    r, _ = _report(tmp_path, doc)
    mem = r["memory"]
    assert mem["attribution"]["by"] == "frames" and mem["attribution"]["sites"] == [want["layer"]]
    calls = mem["calls"]
    # One call per invocation: 2 layers, each call its forward and its backward.
    assert [c["layer"] for c in calls] == [want["layer"]] * 2 and all(c["bwd_bytes_allocated"] for c in calls)
    fwd = sum(c["bytes_allocated"] - c["bwd_bytes_allocated"] for c in calls)
    bwd = sum(c["bwd_bytes_allocated"] for c in calls)
    # The module's own q projection (LlamaAttention.forward called eager_attention_forward) is attention's.
    assert (fwd, bwd) == (want["att_fwd_bytes"] + want["module_fwd_bytes"], want["att_bwd_bytes"])
    stages = _stage_rows(mem, want["layer"])
    for key in [("qk_matmul", "fwd"), ("scale_mask", "fwd"), ("softmax", "fwd"), ("dropout", "fwd"),
                ("av_matmul", "fwd"), ("softmax", "bwd"), ("av_matmul", "bwd"), ("qk_matmul", "bwd")]:
        assert key in stages, key
    # Score blocks by the op that made them: L = D here and the MLP's activations have the score's
    # size, so the repeat_kv copies, the float32 softmax's cast, AV's output, dQ/dK and the MLP's
    # blocks all have a score's size and none of them is counted.
    assert mem["score_matrix"]["blocks"] == want["fwd_scores"] + want["bwd_scores"]
    assert mem["layers"][0]["score_bytes"] == want["score"]
    assert stages[("qk_matmul", "bwd")]["score_matrix_blocks"] == 0
    assert stages[("av_matmul", "fwd")]["score_matrix_blocks"] == 0
    assert mem["attribution"]["gqa_layers"] == [want["layer"]]
    peak = mem["peak"]
    assert peak["attention_share"] > 0 and "attention holds 0%" not in peak["explanation"]
    # Attention's own peak: at least what it holds at the device's peak, a share of what was live then.
    ap = mem["attention_peak"]
    assert ap["bytes"] >= peak["attention_bytes"] and 0 < ap["share"] <= 1
    # A block's location is the user's Python line, with the C++ frames kept beside it.
    for row in peak["live"]:
        if row["pass"] == "bwd":  # the autograd thread has no Python frames: the node is shown
            assert "Backward0::apply" in row["frame"]
        else:
            assert row["frame"].split(":")[0].endswith(".py") and "gather_with_cpp" not in row["frame"]
    att_row = next(row for row in peak["live"] if row["layer"] and row["pass"] == "fwd")
    assert any(s.startswith("??:0 at::_ops::") for s in att_row["stack"])


@pytest.mark.parametrize("releases", [False, True])
def test_backward_node_of_an_op_that_also_ran_outside_attention(tmp_path, releases):
    """Unattributed by its kind alone; attention's when the node's release of its saved forward
    block (a free whose stack names ``SoftmaxBackward0::release_variables``) links it to the call."""
    doc, want = llama_training_step(layers=1, releases=releases)
    trace = doc["device_traces"][0]
    # A classifier's softmax outside attention: SoftmaxBackward0 can no longer be told.
    outside = GATHER + ops("_softmax", "softmax_int") + [py(f"{TORCH}/nn/functional.py", 2140, "softmax"),
                                                         py("/home/u/train.py", 40, "loss_fn")]
    t0 = trace[0]["time_us"]
    trace.insert(0, {"action": "alloc", "addr": 0x100000, "size": 4096, "stream": 0, "time_us": t0,
                     "frames": outside})
    r, _ = _report(tmp_path, doc)
    a = r["memory"]["attribution"]
    if releases:
        assert a["unattributed_bwd_allocs"] == 0
        assert _stage_rows(r["memory"], want["layer"])[("softmax", "bwd")]["score_matrix_blocks"] == 1
        return
    assert a["unattributed_bwd_allocs"] == 1 and a["unattributed_bwd_bytes"] == 2 * want["score"]
    assert ("softmax", "bwd") not in _stage_rows(r["memory"], want["layer"])
    assert "unattributed" in text.render_snapshot_report(r)


def test_hand_written_attention_with_python_stacks_only(tmp_path):
    doc, want = hand_written_inference()
    r, _ = _report(tmp_path, doc)
    mem = r["memory"]
    assert [c["layer"] for c in mem["calls"]] == [want["layer"]] * want["calls"]
    # Only F.softmax has a frame: its output is the score block; the matmuls' outputs stay "other".
    assert mem["score_matrix"]["blocks"] == want["calls"]
    assert mem["layers"][0]["score_bytes"] == want["score"]
    assert set(_stage_rows(mem, want["layer"])) == {("softmax", "fwd"), ("other", "fwd")}


@pytest.mark.parametrize("make", ["llama_training_step", "llama_sdpa_training", "hand_written_inference"])
def test_both_loaders_agree_on_frames(tmp_path, make):
    import tests.memory_snapshots as M

    doc, _ = getattr(M, make)()
    fast, _ = _report(tmp_path, doc)
    plain, _ = _report(tmp_path, doc, "p.pickle", fast=False)
    for r in (fast, plain):
        r.pop("analysis_seconds")
        r["source"] = r["memory"]["snapshot"]["file"] = None
    assert json.dumps(fast, sort_keys=True) == json.dumps(plain, sort_keys=True)


def test_no_annotations_and_no_attention_frames_is_unknown_never_zero(tmp_path):
    doc, _ = known_snapshot()
    del doc["external_annotations"]
    r, _ = _report(tmp_path, doc)
    mem = r["memory"]
    assert mem["attribution"]["by"] == "unknown"
    assert mem["peak"]["attention_share"] is None and mem["peak"]["attention_bytes"] is None
    out = text.render_snapshot_report(r)
    assert engine.UNKNOWN in out and "0%" not in out


def test_several_devices_say_where_attention_ran(tmp_path):
    doc, want = hand_written_inference(device=1)
    big = History(device=0)
    big.alloc(64 << 20, [py("/home/u/infer.py", 5, "<module>")])  # the largest peak, no attention
    doc["device_traces"][0] = big.trace
    doc["segments"].append(framed_snapshot([big])["segments"][0])
    r, _ = _report(tmp_path, doc)
    mem = r["memory"]
    assert mem["device"] == "cuda:1" and mem["attribution"]["devices_with_attention"] == ["cuda:1"]
    assert {d["device"]: d["attention_calls"] for d in mem["devices"]} == {"cuda:0": 0, "cuda:1": want["calls"]}
    assert "attention ran on cuda:1" in text.render_snapshot_report(r)


def test_cli_report_on_a_snapshot_alone_says_where_attention_memory_went(tmp_path):
    doc, want = llama_training_step()
    p = tmp_path / "step.pickle"
    p.write_bytes(pickle.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(p)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert want["layer"] in out.stdout and "by stage: " in out.stdout and "softmax (bwd)" in out.stdout
    assert "attention found by its stack frames" in out.stdout


def test_snapshot_sections_validate(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text())
    memory_schema = {"$defs": schema["$defs"], "$ref": "#/$defs/MemorySection"}
    unknown, _ = known_snapshot()
    del unknown["external_annotations"]
    for doc in (llama_training_step()[0], hand_written_inference()[0], unknown):
        r, _ = _report(tmp_path, doc)
        jsonschema.validate(r["memory"], memory_schema)


def test_every_frame_rule_has_a_real_example_and_source():
    for row in frame_rules.RULES:
        assert row["kind"] in ("attention", "not_attention", "op", "node", "release", "backward") and row["example"] \
            and row["source"]
        assert "name" in row or "file" in row


@pytest.mark.parametrize("filename,name,want", [
    ("/home/u/nanoGPT/model.py", "CausalSelfAttention.forward", ("attention", "module")),
    ("/x/transformers/models/llama/modeling_llama.py", "eager_attention_forward", ("attention", "library")),
    ("/x/transformers/integrations/sdpa_attention.py", "sdpa_attention_forward", ("attention", "library")),
    ("/x/diffusers/models/attention_processor.py", "__call__", ("attention", "diffusers")),
    ("??", "at::_ops::_scaled_dot_product_flash_attention::call(at::Tensor const&)", ("attention", "aten")),
    ("/x/transformers/modeling_attn_mask_utils.py", "_prepare_4d_causal_attention_mask", ("not_attention", "mask prep")),
    ("??", "torch::autograd::generated::ScaledDotProductEfficientAttentionBackward0::apply(x)", ("node", "attention")),
    ("??", "torch::autograd::generated::BmmBackward0::apply(x)", ("node", "matmul")),
    ("/home/u/model.py", "forward", None),
    ("??", "torch::autograd::THPVariable_matmul(_object*, _object*, _object*)", None),
])
def test_frame_rules_on_real_names(filename, name, want):
    assert frame_rules.match(filename, name) == want


def test_module_forward_is_not_attention_without_a_name_that_says_so(tmp_path):
    """torch records co_name only: an MLP's forward and a block's forward are not attention, even
    when their blocks have exactly the score's size."""
    h = History()
    for _ in range(3):
        h.free(h.alloc(1 << 20, [py(f"{TORCH}/nn/functional.py", 2140, "softmax"), py("/home/u/model.py", 30,
                                                                                    "forward")] + MODULE))
    r, _ = _report(tmp_path, framed_snapshot([h]))
    assert r["memory"]["attribution"]["by"] == "unknown" and r["memory"]["score_matrix"]["blocks"] == 0
    assert node  # the backward helper stays importable for the other tests


def test_the_plugin_memory_route_serves_the_frame_attribution(tb_app, tmp_path):
    """The Memory view's data: a snapshot-only run attributed by its frames, by layer and stage."""
    from tests.conftest import all_settled, wait_runs
    from tests.test_plugin_memory import P, _place, get

    doc, want = llama_training_step()
    logdir = tmp_path / "logdir"
    _place(logdir / "train" / "step.pickle", pickle.dumps(doc))
    client, _ = tb_app(logdir)
    wait_runs(client, lambda d: all_settled(d, ["train"]))
    code, body = get(client, f"{P}/memory?run=train")
    mem = body["memory"]
    assert code == 200 and mem["attribution"]["by"] == "frames" and mem["layers"][0]["layer"] == want["layer"]
    assert {(s["stage"], s["pass"]) for s in mem["layers"][0]["stages"]} >= {("softmax", "fwd"), ("softmax", "bwd")}
    assert mem["peak"]["attention_share"] > 0
    # The view asks for the run's worker and span: a snapshot named NAME.pickle is the span "".
    code, body = get(client, f"{P}/memory?run=train&worker=step&span=&points=1500")
    assert code == 200 and body["memory"]["attribution"]["by"] == "frames"


def test_sdpa_called_from_a_forward_with_repeat_kv_is_one_call_per_layer_forward_and_backward(tmp_path):
    from tests.memory_snapshots import llama_sdpa_training

    doc, want = llama_sdpa_training()
    r, _ = _report(tmp_path, doc)
    mem = r["memory"]
    assert mem["attribution"]["sites"] == [want["layer"]]  # repeat_kv joins the call it feeds
    calls = mem["calls"]
    assert len(calls) == want["calls"] and all(c["bwd_bytes_allocated"] for c in calls)  # forward + backward
    # The module's own o_proj (after the core, in LlamaAttention.forward) is attention's too.
    assert sum(c["bytes_allocated"] - c["bwd_bytes_allocated"] for c in calls) == want["fwd_bytes"] + want["module_fwd_bytes"]
    assert sum(c["bwd_bytes_allocated"] for c in calls) == want["bwd_bytes"]
    stages = _stage_rows(mem, want["layer"])
    assert {("fused", "fwd"), ("fused", "bwd"), ("other", "fwd"), ("out_proj", "fwd")} <= set(stages)
    assert mem["score_matrix"]["blocks"] == 0 and mem["attribution"]["gqa_layers"] == [want["layer"]]
    assert not any("??" in lay["layer"] for lay in mem["layers"])  # a site is never named by a C++ frame


def test_a_peak_after_attention_freed_its_blocks_says_where_attention_peaked(tmp_path):
    """0% at the device's peak (an optimizer step after the backward) is true, and never the whole
    story: the sentence names attention's own peak."""
    doc, _ = hand_written_inference()
    h = History(base=0x7E0000000000)
    h.t = doc["device_traces"][0][-1]["time_us"]
    big = h.alloc(64 << 20, [py("/home/u/optim.py", 9, "step")])
    doc["device_traces"][0] += h.trace
    r, _ = _report(tmp_path, doc)
    peak, ap = r["memory"]["peak"], r["memory"]["attention_peak"]
    assert peak["attention_share"] == 0 and ap["bytes"] > 0 and big
    assert "attention's own peak was" in peak["explanation"]


def test_kv_repeated_inside_a_hand_written_attention_is_named_gqa(tmp_path):
    fn = [py("/home/u/model.py", 30, "attention"), py("/home/u/model.py", 58, "forward")] + MODULE
    h = History()
    for _ in range(2):
        kv = [h.alloc(1 << 20, GATHER + ops("repeat_interleave_self_int") + fn) for _ in "kv"]
        s = h.alloc(4 << 20, GATHER + ops("bmm", "matmul") + fn)
        p = h.alloc(4 << 20, GATHER + ops("_softmax", "softmax_int") + fn)
        for blk in (*kv, s, p):
            h.free(blk)
        h.free(h.alloc(1 << 20, [py("/home/u/model.py", 70, "forward")] + MODULE))
    r, _ = _report(tmp_path, framed_snapshot([h]))
    a = r["memory"]["attribution"]
    assert a["gqa_layers"] == ["model.py:attention"] and a["gqa_calls"] == 2
    assert r["memory"]["score_matrix"]["blocks"] == 4


def test_the_same_aten_stack_from_two_lines_is_two_sites(tmp_path):
    """A self-attention and a cross-attention both calling F.scaled_dot_product_attention: their
    kept frames are the same ATen ones; the user line that called them tells the sites apart."""
    sdpa = ops("_scaled_dot_product_efficient_attention", "scaled_dot_product_attention")
    h = History()
    for line in (40, 90):
        h.free(h.alloc(1 << 20, GATHER + sdpa + [py("/home/u/unet.py", line, "forward")] + MODULE))
        h.free(h.alloc(4096, [py("/home/u/unet.py", 120, "forward")] + MODULE))
    r, _ = _report(tmp_path, framed_snapshot([h]))
    assert r["memory"]["attribution"]["sites"] == ["unet.py:40 forward (scaled_dot_product_attention)",
                                                  "unet.py:90 forward (scaled_dot_product_attention)"]
