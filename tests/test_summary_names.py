"""Summary numbers that agree (issue 46, item 10): the headline names the largest stage truthfully (a QKV projection
of most of the time is not 'other work takes the most'), each achieved rate says what time it is over, and one
layer has one name in every view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file


def _record(tmp: Path, name: str, fn, *, modules: bool = True) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    torch.set_num_threads(1)
    fn(torch)  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=modules) as prof:
        fn(torch)
    out = tmp / f"{name}.json"
    prof.export_chrome_trace(str(out))
    return out


def _wide_mha(torch):
    """nn.MultiheadAttention in training (its explicit path) with a wide model and 8 tokens: the input projection's
    3·L·D² FLOPs are 3·8·1024² = 25 M, QKᵀ and AV's 2·L²·D = 131 K each, so the projection outweighs the core."""
    from torch import nn

    m = nn.MultiheadAttention(1024, 8, batch_first=True)
    x = torch.randn(1, 8, 1024)
    for _ in range(3):
        m(x, x, x)[0].sum().backward()


def _events(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def test_the_headline_names_a_projection_that_outweighs_the_core(tmp_path):
    path = _record(tmp_path, "wide_mha", _wide_mha)
    evs = _events(path)
    # the walker: the input projection is the first aten::linear inside each MultiheadAttention module call
    mods = [e for e in evs if re.match(r"nn\.Module: MultiheadAttention_\d+$", e.get("name", ""))]
    assert len(mods) == 3
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    proj = sum(next(o["dur"] for o in ops if o["name"] == "aten::linear" and o["tid"] == m["tid"]
                    and m["ts"] <= o["ts"] <= m["ts"] + m["dur"]) for m in mods)
    # the projection outweighs the core (QKᵀ and AV, 190x fewer FLOPs): the recording's own fact, whatever
    # share of the module the profiler's overhead takes on a loaded machine
    core = sum(o["dur"] for m in mods for o in ops if o["name"] in ("aten::bmm", "aten::baddbmm")
               and o["tid"] == m["tid"] and m["ts"] <= o["ts"] <= m["ts"] + m["dur"])
    assert proj > core > 0
    r = analyze_file(str(path))
    msg = next(v["message"] for v in r["verdicts"] if v["id"] == "eager_attention")
    assert ": the QKV projection takes the most, " in msg and "other work" not in msg, msg
    key = f"{r['time_basis']}_us"
    share = sum(s[key] for s in r["stages"] if s["stage"] == "qkv_proj") / sum(s[key] for s in r["stages"])
    assert f"takes the most, {share * 100:.0f}% of attention time" in msg, (msg, share)


_COMPILED = r"""
import sys, torch
from torch.profiler import ProfilerActivity, profile
sys.path.insert(0, sys.argv[2])
from tests.cpu_models import B, D, L, model
torch.set_num_threads(1)
for variant in ("eager", "compiled"):
    torch.manual_seed(0)
    m = model("sdpa" if variant == "compiled" else "eager")
    run = torch.compile(m) if variant == "compiled" else m
    x = torch.randn(B, L, D)
    with torch.no_grad():
        run(x)  # compiled before the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
            run(x)
    prof.export_chrome_trace(f"{sys.argv[1]}/{variant}.json")
"""


@pytest.fixture(scope="module")
def compiled_pair(tmp_path_factory):
    """The cpu_models attention model eager and under torch.compile (Inductor on the CPU), plain torch.profiler."""
    import subprocess
    import sys

    from tests.conftest import REPO

    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("compiled")
    proc = subprocess.run([sys.executable, "-c", _COMPILED, str(root), str(REPO)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "eager.json", root / "compiled.json"


def test_a_compiled_layer_has_its_own_pages_name_in_compare(compiled_pair):
    from tb_attn_plugin.report.compare import compare_reports

    eager, compiled = compiled_pair
    # the walker: Inductor's region has no module hooks, so the compiled trace cannot name the layer "Attn"
    assert any(e.get("name") == "nn.Module: Attn_0" for e in _events(eager))
    assert not any(e.get("name", "").startswith("nn.Module: Attn") for e in _events(compiled))
    assert any(e.get("name", "").startswith("Torch-Compiled Region") for e in _events(compiled))
    r0, r1 = analyze_file(str(eager)), analyze_file(str(compiled))
    own0 = {lay.layer_type for lay in r0["layers"]}
    own1 = {lay.layer_type for lay in r1["layers"]}
    assert own0 == {"Attn"} and len(own1) == 1 and own1 != own0
    (row,) = compare_reports([("eager", r0), ("compiled", r1)])["layers"]
    # each run's page names the layer type as the row does, and its layers as the row lists them
    assert row["layer_type"].split(" = ") == ["Attn", *own1], row["layer_type"]
    assert row["layers"] == [sorted(lay.layer for lay in r["layers"]) for r in (r0, r1)]


def test_hf_module_paths_read_as_named_modules_gives_them(tmp_path):
    """A tiny Hugging Face Llama (from a config, no download) under the collector: its attention modules are
    ``model.layers.N.self_attn`` (LlamaForCausalLM keeps its decoder as ``.model``); the collector added a
    ``model.`` of its own, which read ``model.model.layers.0``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import gzip
    from urllib.parse import parse_qs

    import tb_attn_plugin

    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="sdpa")
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(0, 128, (1, 16))
    with tb_attn_plugin.profile(str(tmp_path), model=m, scalars=False,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        for _ in range(2):
            m(input_ids=ids).logits.sum().backward()
            prof.step()
    with gzip.open(prof.traces[0]) as f:
        tags = [e["name"] for e in json.load(f)["traceEvents"] if e.get("name", "").startswith("tb_attn::call ")]
    tagged = {parse_qs(t[len("tb_attn::call "):])["layer"][0] for t in tags}
    modules = dict(m.named_modules())
    assert tagged == {f"model.layers.{i}.self_attn" for i in range(2)}
    assert all(type(modules[p]).__name__ == "LlamaAttention" for p in tagged)  # each is a real module path
    r = analyze_file(prof.traces[0])
    assert {lay.layer for lay in r["layers"]} == tagged


def test_each_achieved_rate_says_what_time_it_is_over():
    """OWLv2 eager on the H100: the layer's FLOP rate is over its core stages (25.6 TFLOP/s), the roofline's over its
    modelled stages (27.4), the layer's time is the whole call: each says so in the text, the JSON docs and the tab."""
    from tb_attn_plugin.report.text import render
    from tests.conftest import shared_trace

    r = analyze_file(str(shared_trace("tl_h100_owlv2_eager_bmm_softmax")))
    lay = r["layers"][0]
    core = sum(s.gpu_us for s in lay.stages if s.stage not in ("qkv_proj", "out_proj", "other"))
    assert lay.tflops == pytest.approx(lay.flops / core / 1e6, rel=2e-3)  # over the core ...
    assert abs(lay.flops / lay.gpu_us / 1e6 - lay.tflops) > 0.01 * lay.tflops  # ... not the whole call
    text = render(r)
    head = next(line for line in text.splitlines() if line.strip().startswith("top layers"))
    assert "gpu (whole call)" in head and "FLOP rate (core)" in head
    schema = json.loads((Path(__file__).parent.parent / "tb_attn_plugin/report/schema.json").read_text())
    docs = json.dumps(schema)
    assert "TFLOP/s over its attention core's time" in docs and "the modelled stages' time" in docs
    src = Path(__file__).parent.parent / "frontend/src/views"
    assert '"achieved (core)"' in (src / "stages.ts").read_text() and '"Achieved (core)"' in (src / "summary.ts").read_text()
    assert '"achieved (modelled stages)"' in (src / "roofline.ts").read_text()
