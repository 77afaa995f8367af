"""The collector on the CPU: real torch.profiler traces, read back by the engine (analyze_file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tb_attn_plugin  # noqa: E402
from tb_attn_plugin.collector import attention_region, stage  # noqa: E402
from tb_attn_plugin.format import tags  # noqa: E402
from tb_attn_plugin.report.build import analyze_file  # noqa: E402
from tests.cpu_models import B, D, HEADS, L, LAYERS, model  # noqa: E402

ACTIVE = 2
SCHEDULE = dict(wait=1, warmup=1, active=ACTIVE, repeat=1)
STEPS = 1 + 1 + ACTIVE + 1  # one step after the window, where nothing may be tagged


def run_collector(logdir: Path, m: nn.Module, x, variant: str, **kw):
    torch.manual_seed(0)
    seen = []  # (profiler action, is SDPA patched) after each step
    orig = F.scaled_dot_product_attention
    with tb_attn_plugin.profile(logdir, model=m, variant=variant, schedule=torch.profiler.schedule(**SCHEDULE),
                                extra={"seq_len": x.shape[1]}, **kw) as prof:
        for _ in range(STEPS):
            m(x).sum().backward()
            prof.step()
            seen.append((prof.current_action.name, F.scaled_dot_product_attention is not orig))
    assert F.scaled_dot_product_attention is orig, "the collector left SDPA patched after the run"
    return prof, seen


def trace_events(path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("collector_runs")
    out = {}
    for mode in ("sdpa", "math", "mha"):
        torch.manual_seed(0)
        out[mode] = run_collector(root / mode, model(mode), torch.randn(B, L, D), mode,
                                  profile_memory=(mode == "math"))
    return out


def _layers(report):
    return {lay.layer: lay for lay in report["layers"]}


@pytest.mark.parametrize("mode,impl,backend", [("sdpa", "cpu_fused", "flash_cpu"), ("math", "math", "math")])
def test_sdpa_calls_counted_with_backend_and_shape(runs, mode, impl, backend):
    prof, _ = runs[mode]
    assert len(prof.traces) == 1 and Path(prof.traces[0]).name.endswith(".pt.trace.json.gz")
    tagged = [e for e in trace_events(prof.traces[0]) if e.get("name", "").startswith(tags.CALL_PREFIX)]
    assert len(tagged) == LAYERS * ACTIVE  # the warmup step's tags are not in the trace
    fields = tags.parse_call(tagged[0]["name"])
    assert fields["impl"] == "sdpa" and fields["backend"] == backend
    assert (fields["b"], fields["hq"], fields["hkv"], fields["lq"], fields["lk"], fields["d"]) == (B, HEADS, HEADS, L, L, D // HEADS)
    assert fields["causal"] is (mode == "sdpa") and fields["dropout"] == (0.1 if mode == "math" else 0.0)

    report = analyze_file(prof.traces[0])
    assert report["calls"] == LAYERS * ACTIVE
    layers = _layers(report)
    assert sorted(layers) == [f"{i}" for i in range(LAYERS)]  # nn.Sequential's named_modules paths
    for lay in layers.values():
        assert lay.calls == ACTIVE and lay.implementation == impl and lay.backend == backend
        assert lay.shape.q_len == L and lay.shape.head_dim == D // HEADS and lay.shape.batch == B
        assert lay.dtype == "float32"
        # backward time lands on the forward layer
        bwd = [s for s in lay.stages if s.pass_ == "bwd"]
        assert bwd and sum(s.cpu_us for s in bwd) > 0
    assert report["metadata"]["variant"] == mode and report["metadata"]["seq_len"] == L
    assert report["metadata"]["torch"] == torch.__version__ and report["metadata"]["device"] == "cpu"


def test_multihead_attention_tagged_by_module_hooks(runs):
    prof, _ = runs["mha"]
    report = analyze_file(prof.traces[0])
    assert report["calls"] == LAYERS * ACTIVE
    layers = _layers(report)
    assert sorted(layers) == [f"{i}.attn" for i in range(LAYERS)]
    assert {lay.implementation for lay in layers.values()} == {"mha"}
    assert all(lay.shape.q_heads == HEADS and lay.shape.q_len == L for lay in layers.values())


def test_hooks_only_inside_the_window(runs):
    _, seen = runs["sdpa"]
    # after step k the profiler is in the action of step k+1: warmup, record, record-and-save, none
    assert seen == [("WARMUP", True), ("RECORD", True), ("RECORD_AND_SAVE", True), ("NONE", False), ("NONE", False)]
    m = model("sdpa")
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention
    assert not m[0]._forward_pre_hooks and not torch.nn.modules.module._global_forward_pre_hooks


def test_memory_per_call_with_profile_memory(runs):
    prof, _ = runs["math"]
    report = analyze_file(prof.traces[0])
    # the math backend materialises the B*H*L*L score matrix in every call
    for lay in report["layers"]:
        assert lay.memory_bytes is not None and lay.memory_bytes >= B * HEADS * L * L * 4


def test_scalars_in_the_event_file(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    prof, _ = runs["sdpa"]
    acc = EventAccumulator(str(Path(prof.traces[0]).parent))
    acc.Reload()
    tags_ = acc.Tags()["scalars"]
    assert "tb_attn/attention_share" in tags_ and "tb_attn/stage/fused/fwd_ms" in tags_ and "tb_attn/stage/fused/bwd_ms" in tags_
    (share,) = acc.Scalars("tb_attn/attention_share")
    assert 0 < share.value <= 1 and share.step == 1 + 1 + ACTIVE
    (calls,) = acc.Scalars("tb_attn/calls")
    assert calls.value == LAYERS * ACTIVE


class HandWritten(nn.Module):
    """Custom attention marked by the user: a region with stage marks, one as a decorator."""

    def forward(self, x):
        b, n, d = x.shape
        q = k = v = x.view(b, n, HEADS, d // HEADS).transpose(1, 2)
        with attention_region("custom.attn", q=q, k=k, causal=False):
            with stage("qk"):
                a = q @ k.transpose(-1, -2) * (d // HEADS) ** -0.5
            with stage("softmax"):
                a = torch.exp(a - a.amax(-1, keepdim=True))
                a = a / a.sum(-1, keepdim=True)
            y = self.av(a, v)
        return y.transpose(1, 2).reshape(b, n, d)

    @stage("av")
    def av(self, a, v):
        return a @ v


def test_user_region_and_stage_marks(tmp_path):
    m = HandWritten()
    x = torch.randn(B, L, D, requires_grad=True)
    prof, _ = run_collector(tmp_path / "user", m, x, "user")
    report = analyze_file(prof.traces[0])
    assert report["calls"] == ACTIVE
    (lay,) = report["layers"]
    assert lay.layer == "custom.attn" and lay.shape.q_len == L and lay.shape.head_dim == D // HEADS
    fwd = {s.stage for s in lay.stages if s.pass_ == "fwd"}
    assert {"qk_matmul", "softmax", "av_matmul"} <= fwd
    assert any(s.pass_ == "bwd" and s.cpu_us > 0 for s in lay.stages)


def test_user_marks_inert_outside_a_window(tmp_path):
    m = HandWritten()
    x = torch.randn(B, L, D)
    path = tmp_path / "plain.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        m(x)
    p.export_chrome_trace(str(path))
    names = [e.get("name", "") for e in json.loads(path.read_text())["traceEvents"]]
    assert not any(n.startswith(("tb_attn::", )) for n in names)


def test_bad_input_is_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="unknown attention stage 'qkt'"):
        stage("qkt")
    with pytest.raises(TypeError, match="unknown field"):
        attention_region("x", heads=3)
    with pytest.raises(ValueError, match="needs a logdir"):
        tb_attn_plugin.profile()
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        tb_attn_plugin.profile(tmp_path, model=lambda x: x)


def test_compiled_model_no_graph_break_no_recompile(tmp_path):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    eager = model("sdpa")
    m = torch.compile(eager, backend="eager")  # dynamo's guards and breaks; no inductor build time
    x = torch.randn(B, L, D)
    m(x).sum().backward()  # compiled before the window opens
    graphs = counters["stats"]["unique_graphs"]
    prof, seen = run_collector(tmp_path / "compiled", m, x, "compiled")
    m(x).sum().backward()  # and after it closes
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == graphs, "the window made dynamo recompile"
    assert any(patched for _, patched in seen)  # tagging was on, just not inside the compiled frame
    report = analyze_file(prof.traces[0])
    assert report["calls"] == LAYERS * ACTIVE  # found from the extern SDPA op that survives compilation
    assert all(lay.compiled for lay in report["layers"])
    torch._dynamo.reset()


def test_call_tags_round_trip_and_the_name_cache_keeps_types_apart():
    from tb_attn_plugin.format import tags

    fields = dict(layer="blocks.0.attn", cls="Attn&Co=1", impl="sdpa", backend="flash", b=2, hq=8, hkv=2, lq=128, lk=128,
                  d=64, dtype="bfloat16", causal=True, mask="causal", dropout=0.0, scale=None, gqa=True, compiled=False)
    name = tags.call_name(**fields)
    assert tags.call_name(**fields) is name  # encoded once, reused
    parsed = tags.parse_call(name)
    assert parsed == {k: v for k, v in fields.items() if v is not None}
    # 0 and 0.0 (and True and 1) are equal as dict keys but not as text: the cache must not mix them.
    assert tags.parse_call(tags.call_name(layer="x", dropout=0))["dropout"] == 0.0
    assert "dropout=0&" in tags.call_name(layer="x", dropout=0, d=1) + "&"
    assert "dropout=0.0" in tags.call_name(layer="x", dropout=0.0, d=1)
    assert tags.call_name(layer="x", mask=["not", "hashable"]).startswith(tags.CALL_PREFIX)
