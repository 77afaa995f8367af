"""The engine on CPU training traces (forward and backward) recorded here with plain torch.profiler:
backward ops must land on the forward layer and on the right stage, for every attention path."""

from __future__ import annotations

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace.events import decode
from tb_attn_plugin.trace.link import link
from tb_attn_plugin.trace.read import read_trace_text
from tests.cpu_models import LAYERS, STEPS

CALLS = LAYERS * STEPS


@pytest.fixture(scope="module")
def reports(cpu_traces):
    return {mode: analyze_file(str(p)) for mode, p in cpu_traces.items()}


def cells(r, layer=None):
    if layer is None:
        return {(s["stage"], s["pass"]): s["cpu_us"] for s in r["stages"]}
    lay = next(lay for lay in r["layers"] if lay.layer == layer)
    return {(s.stage, s.pass_): s.cpu_us for s in lay.stages}


def op_stage(r, name):
    return {(o["stage"], o["pass"]) for o in r["ops"] if o["name"] == name}


@pytest.mark.parametrize("mode,impl,layer_type", [
    ("sdpa", "cpu_fused", "Attn"), ("math", "math", "Attn"), ("eager", "eager", "Attn"),
    ("mha", "eager", "MultiheadAttention"),
])
def test_calls_layers_and_implementation(reports, mode, impl, layer_type):
    r = reports[mode]
    assert r["time_basis"] == "cpu" and r["device"] is None
    assert r["calls"] == CALLS
    assert [(i["layer_type"], i["implementation"], i["calls"]) for i in r["implementations"]] == [(layer_type, impl, CALLS)]
    assert sorted(lay.layer for lay in r["layers"]) == [f"{layer_type}_{i}" for i in range(LAYERS)]
    assert all(lay.calls == STEPS for lay in r["layers"])
    assert [s["calls"] for s in r["steps"]] == [LAYERS] * STEPS


@pytest.mark.parametrize("mode", ["sdpa", "math", "eager", "mha", "tagged"])
def test_backward_lands_on_every_forward_layer(reports, mode):
    r = reports[mode]
    for lay in r["layers"]:
        c = cells(r, lay.layer)
        assert sum(v for (st, ps), v in c.items() if ps == "bwd") > 0, lay.layer
        assert c.get(("qkv_proj", "bwd"), 0) > 0 and c.get(("out_proj", "bwd"), 0) > 0


def test_sdpa_backward_is_the_fused_backward_op(reports):
    r = reports["sdpa"]
    assert cells(r)[("fused", "bwd")] > 0
    assert op_stage(r, "ScaledDotProductFlashAttentionForCpuBackward0") == {("fused", "bwd")}
    assert op_stage(r, "aten::_scaled_dot_product_flash_attention_for_cpu_backward") == {("fused", "bwd")}
    assert op_stage(r, "aten::_scaled_dot_product_flash_attention_for_cpu") == {("fused", "fwd")}
    lay = r["layers"][0]
    assert lay.causal is True and lay.shape.q_len == 32 and lay.shape.head_dim == 16
    assert lay.dtype == "float32"


@pytest.mark.parametrize("mode,softmax_bwd", [("math", "SafeSoftmaxBackward0"), ("eager", "SoftmaxBackward0"),
                                              ("mha", "SoftmaxBackward0")])
def test_unfused_backward_splits_into_stages(reports, mode, softmax_bwd):
    r = reports[mode]
    c = cells(r)
    for st in ("qk_matmul", "softmax", "av_matmul"):
        assert c.get((st, "fwd"), 0) > 0 and c.get((st, "bwd"), 0) > 0, st
    assert op_stage(r, softmax_bwd) == {("softmax", "bwd")}
    assert op_stage(r, "BmmBackward0") == {("qk_matmul", "bwd"), ("av_matmul", "bwd")}
    assert all(lay.score_bytes == 2 * 4 * 32 * 32 * 4 for lay in r["layers"])


def test_dropout_has_its_own_stage(reports):
    for mode in ("math", "eager"):
        c = cells(reports[mode])
        assert c.get(("dropout", "fwd"), 0) > 0 and c.get(("dropout", "bwd"), 0) > 0, mode


def test_backward_nodes_link_to_forward_ops(cpu_traces):
    path = str(cpu_traces["eager"])
    text, _ = read_trace_text(path)
    L = link(decode(path, text))
    assert L.fwd_of
    for node, fwd in L.fwd_of.items():
        assert L.names[node].endswith(("Backward0", "Backward1"))
        assert L.node_of[fwd] < 0  # the origin is a forward op
        assert L.ts[fwd] < L.ts[node]


def test_flops_and_rate_from_shapes(reports):
    lay = reports["eager"]["layers"][0]
    fwd = 4 * (2 * 4) * 32 * 32 * 16
    assert lay.flops == pytest.approx(fwd * 3.5 * STEPS)  # forward + backward (2.5x), per call
    assert lay.tflops > 0


def test_tagged_region_and_stage_marks(reports):
    r = reports["tagged"]
    assert r["calls"] == CALLS
    assert sorted(lay.layer for lay in r["layers"]) == ["blocks.0.attn", "blocks.1.attn"]
    assert {lay.layer_type for lay in r["layers"]} == {"Attn"}  # the enclosing module class
    assert all(lay.source == "tag" for lay in r["layers"])
    lay = r["layers"][0]
    assert lay.shape.q_len == 32 and lay.shape.head_dim == 16 and lay.causal is False
    c = cells(r)
    for st in ("qk_matmul", "softmax", "av_matmul"):  # from the marks, not from op names
        assert c.get((st, "fwd"), 0) > 0 and c.get((st, "bwd"), 0) > 0, st
    assert op_stage(r, "aten::exp") == {("softmax", "fwd")}
    assert ("qk_matmul", "fwd") in op_stage(r, "aten::einsum") and ("av_matmul", "fwd") in op_stage(r, "aten::einsum")


def test_memory_per_call_from_profiler_events(reports):
    for mode in ("eager", "math"):
        for lay in reports[mode]["layers"]:
            # at least the B*H*L*L float32 score matrix is allocated inside the call
            assert lay.memory_bytes >= 2 * 4 * 32 * 32 * 4, (mode, lay.layer)


def test_compiled_backward_lands_on_the_compiled_layers(tmp_path):
    """torch.compile runs the backward as one CompiledFunctionBackward node; its SDPA backward ops
    are paired with the compiled forward calls (in reverse layer order) rather than lost."""
    import torch

    from tests.cpu_models import B, D, L, model

    torch.manual_seed(0)
    m = torch.compile(model("sdpa"), backend="aot_eager")  # no inductor: compiles in seconds
    x = torch.randn(B, L, D)
    m(x).sum().backward()  # compile outside the window
    path = tmp_path / "compiled.pt.trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.profiler.record_function("ProfilerStep#0"):
            m(x).sum().backward()
    prof.export_chrome_trace(str(path))
    r = analyze_file(str(path))
    assert r["calls"] == LAYERS
    assert all(lay.compiled for lay in r["layers"])
    for lay in r["layers"]:
        c = cells(r, lay.layer)
        assert c.get(("fused", "fwd"), 0) > 0 and c.get(("fused", "bwd"), 0) > 0, lay.layer
    assert op_stage(r, "aten::_scaled_dot_product_flash_attention_for_cpu_backward") == {("fused", "bwd")}
