"""The attention module's scope (issue 45): where Hugging Face splits an attention module into the
attention proper and its output projection (BertAttention = BertSelfAttention + BertSelfOutput, as
ViTAttention and TimeSformerAttention in transformers 4.x), a call's ops are the outer module's, so the
output projection's time and blocks are attention's; where the outer module adds no projection
(T5LayerSelfAttention = norm + T5Attention + residual; T5Attention has its own ``o``), the call stays
T5Attention. Recorded here from transformers' own classes (random weights, no download) on the CPU with
plain torch.profiler, two layers, two training steps, profile_memory; a walker over the raw events sums
the bytes allocated inside each scope."""

from __future__ import annotations

import json

import pytest

from tb_attn_plugin.report.build import analyze_file

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")


def _record(name: str, out) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    if name == "bert":
        model = transformers.BertModel(transformers.BertConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100,
            max_position_embeddings=64, attn_implementation="eager"), add_pooling_layer=False)
    else:
        model = transformers.T5EncoderModel(transformers.T5Config(
            d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2, vocab_size=100, attn_implementation="eager"))
    model.train()
    ids = torch.randint(0, 100, (2, 32))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, profile_memory=True,
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out))) as p:
        for _ in range(3):
            model(input_ids=ids).last_hidden_state.sum().backward()
            p.step()


def _forward_bytes(events: list[dict], module: str) -> list[int]:
    """Per `nn.Module: <module>_N` event, in time order: the bytes of the allocations made inside it."""
    mem = [e for e in events if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0]
    mods = sorted((m for m in events if m.get("cat") == "python_function"
                   and m.get("name", "").startswith(f"nn.Module: {module}_")), key=lambda m: m["ts"])
    return [sum(e["args"]["Bytes"] for e in mem if e["tid"] == m["tid"] and m["ts"] <= e["ts"] <= m["ts"] + m["dur"])
            for m in mods]


@pytest.mark.parametrize("name,scope,inner", [("bert", "BertAttention", "BertSelfAttention"),
                                              ("t5", "T5Attention", "T5Attention")])
def test_call_is_the_attention_modules_scope(tmp_path, name, scope, inner):
    path = tmp_path / f"{name}.json"
    _record(name, path)
    events = json.load(open(path))["traceEvents"]
    want = _forward_bytes(events, scope)
    assert len(want) == 4  # 2 layers x 2 steps
    if name == "bert":  # the output projection allocates inside BertAttention, outside BertSelfAttention
        assert all(w > s for w, s in zip(want, _forward_bytes(events, inner)))
    r = analyze_file(str(path))
    assert r["calls"] == 4 and {lay.layer_type for lay in r["layers"]} == {scope}  # the module the call spans
    calls = sorted(r["memory"]["calls"], key=lambda c: (c["step"], c["layer"]))
    assert [c["bytes_allocated"] - c["bwd_bytes_allocated"] for c in calls] == want
    stages = {(s["stage"], s["pass"]) for s in r["stages"]}
    assert ("out_proj", "fwd") in stages and ("out_proj", "bwd") in stages
