"""The engine on the six real GPU traces: every fact measured in ../shared/traces/README.md."""

from __future__ import annotations

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace

_cache: dict[str, dict] = {}


def report(name: str) -> dict:
    if name not in _cache:
        _cache[name] = analyze_file(str(shared_trace(name)))
    return _cache[name]


def kernels(r, stage, ps="fwd"):
    rows = [k for k in r["kernels"] if k["stage"] == stage and k["pass"] == ps]
    return sum(k["count"] for k in rows), round(sum(k["gpu_us"] for k in rows), 1), rows


def layer_type_calls(r) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in r["implementations"]:
        out[i["layer_type"]] = out.get(i["layer_type"], 0) + i["calls"]
    return out


def test_h100_bert_sdpa_flash():
    r = report("tl_h100_bert_small_sdpa_flash")
    n, us, rows = kernels(r, "fused")
    assert (n, us) == (4, 37.4)
    assert all("pytorch_flash::flash_fwd_kernel" in k["name"] for k in rows)
    assert r["calls"] == 4
    assert layer_type_calls(r) == {"BertAttention": 4}
    assert {lay.implementation for lay in r["layers"]} == {"flash"}
    assert {lay.backend for lay in r["layers"]} == {"flash"}
    shape = r["layers"][0].shape
    assert (shape.batch, shape.q_heads, shape.q_len, shape.k_len, shape.head_dim) == (1, 8, 141, 141, 64)
    assert r["layers"][0].dtype == "bfloat16" and r["layers"][0].causal is False
    assert r["device"]["name"].startswith("NVIDIA H100")
    assert kernels(r, "softmax")[0] == 0


def test_h100_owlv2_eager():
    r = report("tl_h100_owlv2_eager_bmm_softmax")
    assert kernels(r, "fused")[0] == 0
    n, us, rows = kernels(r, "softmax")
    assert (n, us) == (180, 262538.2)
    assert kernels(r, "qk_matmul")[0] == 180
    assert kernels(r, "av_matmul")[0] == 180
    qk_names = {k["name"] for k in kernels(r, "qk_matmul")[2]}
    av_names = {k["name"] for k in kernels(r, "av_matmul")[2]}
    assert all("_tn_align1" in name for name in qk_names)  # QK^T: transposed operand
    assert all("_nn_align1" in name for name in av_names)
    assert layer_type_calls(r) == {"Owlv2Attention": 180}
    assert {lay.implementation for lay in r["layers"]} == {"eager"}
    ids = [v["id"] for v in r["verdicts"]]
    assert ids[0] == "eager_attention" and "softmax_dominates" in ids
    assert r["layers"][0].score_bytes > 0


def test_mi300x_bert_aotriton():
    r = report("tl_mi300x_bert_small_sdpa_aotriton")
    n, us, rows = kernels(r, "fused")
    assert (n, us) == (4, 113.7)
    assert {k["name"] for k in rows} == {"attn_fwd"}
    assert layer_type_calls(r) == {"BertAttention": 4}
    assert {lay.implementation for lay in r["layers"]} == {"aotriton"}
    assert {lay.backend for lay in r["layers"]} == {"flash"}
    assert r["device"]["vendor"] == "AMD"


def test_mi300x_torch_compile():
    r = report("tl_mi300x_torch_compile_small")
    assert kernels(r, "fused")[:2] == (1, 3683.5)
    assert r["calls"] == 1
    (lay,) = r["layers"]
    assert lay.compiled is True and lay.implementation == "aotriton"
    assert lay.shape.q_len == 4096 and lay.flops > 0 and lay.tflops > 0


def test_mi300x_flux_graph_replay():
    r = report("tl_mi300x_xdit_flux1_aiter_fmha_hipgraph")
    n, us, rows = kernels(r, "fused")
    assert (n, us) == (70, 2728.5)
    assert {k["name"] for k in rows} == {"aiter::fmha_fwd_hd128_bf16_rtz", "attn_fwd"}
    assert kernels(r, "softmax")[:2] == (24, 810.1)
    calls = layer_type_calls(r)
    assert calls["CLIPAttention"] == 12 and calls["T5Attention"] == 24
    impl = {(i["layer_type"], i["implementation"]) for i in r["implementations"]}
    assert ("T5Attention", "eager") in impl and ("CLIPAttention", "aotriton") in impl
    ck = [lay for lay in r["layers"] if lay.implementation == "ck"]
    assert sum(lay.calls for lay in ck) == 57 and {lay.backend for lay in ck} == {"aiter::fmha_v3_fwd"}
    assert r["trace"]["graph_kernels"] > 0
    # pointwise Triton kernels named after fmha_v3_fwd are not attention kernels
    assert not any(k["name"].startswith("triton_") and k["stage"] == "fused" for k in r["kernels"])


def test_negative_control_has_no_attention():
    r = report("hta_a100_negative_log_softmax_fwdbwd")
    assert r["calls"] == 0 and r["layers"] == [] and r["stages"] == []
    assert r["attention_gpu_us"] == 0 and r["attention_share"] == 0
    assert r["total_gpu_us"] > 0
    assert r["verdicts"][0]["id"] == "no_attention"
    assert r["trace"]["backward_links"] > 0  # it does have backward, just no attention


@pytest.mark.parametrize("name", ["tl_h100_bert_small_sdpa_flash", "tl_h100_owlv2_eager_bmm_softmax",
                                  "tl_mi300x_bert_small_sdpa_aotriton", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"])
def test_share_is_attention_over_all_gpu_time(name):
    r = report(name)
    assert 0 < r["attention_share"] <= 1
    assert r["attention_share"] == pytest.approx(r["attention_gpu_us"] / r["total_gpu_us"], rel=1e-4)
    assert sum(s["gpu_us"] for s in r["stages"]) == pytest.approx(r["attention_gpu_us"], rel=1e-6)
    assert sum(lay.gpu_us for lay in r["layers"]) == pytest.approx(r["attention_gpu_us"], rel=1e-6)


def test_layer_kernels_add_up_to_the_run():
    r = report("tl_h100_owlv2_eager_bmm_softmax")
    per_layer = {}
    for lay in r["layers"]:
        assert sum(k.gpu_us for k in lay.kernels) == pytest.approx(lay.gpu_us, rel=1e-6)
        for k in lay.kernels:
            key = (k.name, k.stage, k.pass_)
            per_layer[key] = per_layer.get(key, 0) + k.count
    run = {(k["name"], k["stage"], k["pass"]): k["count"] for k in r["kernels"]}
    assert per_layer == run


def test_layer_rows_are_capped_largest_first(monkeypatch):
    from tb_attn_plugin.report import build, layers

    monkeypatch.setattr(layers, "MAX_LAYERS", 2)
    r = build.analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    full = report("tl_h100_owlv2_eager_bmm_softmax")
    assert [lay.layer for lay in r["layers"]] == [lay.layer for lay in full["layers"][:2]]
    assert r["layers_omitted"] == len(full["layers"]) - 2 and full["layers_omitted"] == 0
    assert r["attention_gpu_us"] == full["attention_gpu_us"]  # totals still cover every layer
