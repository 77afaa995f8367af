"""Causes and fixes earned by the call's own evidence (issue 46, items 1-3): a fused kernel of any family counts
in "ran"; rotary embedding before a fused call is the layer's preparation, not repeated steps; a dtype cast
outside the math backend does not blame it; "pass is_causal" only for an explicit mask without is_causal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.attention.user_table import parse
from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import TraceBuilder
from tests.test_kernel_calls import UNKNOWN
from tests.test_kernel_reading import _record

TABLE = b'''
[[family]]
name = "zz_attention"
pattern = "zz_custom_attn_fwd_kernel"
stage = "fused"
pass = "fwd"
implementation = "custom"
example = "zz_custom_attn_fwd_kernel<128>"
source = "our own kernels"
'''


@pytest.fixture(autouse=True)
def _no_user_rows():
    yield
    P.set_user_families(())


def _events(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def test_a_users_fused_family_counts_in_ran(tmp_path):
    P.set_user_families(parse("mine.toml", TABLE))
    b = TraceBuilder()
    b.eager_calls([[(UNKNOWN, 50.0)] for _ in range(4)])
    path = b.write(tmp_path / "custom.json")
    per_call = sum(e.get("name") == UNKNOWN for e in _events(path)) / 4  # the walker: one kernel per call
    r = analyze_file(str(path))
    (row,) = r["reading"]
    assert row["implementation"] == "custom" and row["calls"] == 4
    assert row["expected"]["ran"] == per_call == 1 and row["expected"]["expected"] == 1
    assert row["expected"]["outside"]["per_call"] == 0


# FlashAttention-3's forward as DeepSeek-V3's H800 profile names it (deepseek-ai/profile-data prefill.json)
FA3 = ("void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, "
       "true, flash::SingleTileScheduler, flash::SeqLenTraits<true> >(flash::CollectiveMainloopFwd<Flash_fwd_kernel_"
       "traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, true, flash::SeqLenTraits<true> >::Params)")


def test_fa3_under_a_custom_autograd_function_counts_in_ran(tmp_path):
    """The FA3 kernel launched by a custom autograd Function's op (flash_attn_interface's FlashAttnFunc): the
    kernel is the call's fused step, never 'outside'."""
    b = TraceBuilder()
    b.eager_calls([[(FA3, 100.0)] for _ in range(3)], op_name="FlashAttnFunc")
    path = b.write(tmp_path / "fa3.json")
    per_call = sum(e.get("name") == FA3 for e in _events(path)) / 3
    r = analyze_file(str(path))
    (row,) = r["reading"]
    e = row["expected"]
    assert e["ran"] == per_call == 1 and e["outside"]["per_call"] == 0  # the kernel counted, none outside


def _rotary_sdpa(torch):
    """A Llama-style layer on the CPU: rotary embedding (mul, add of rotate_half) on q and k, then fused SDPA."""
    import torch.nn.functional as F
    from torch import nn

    class RotaryAttention(nn.Module):
        def forward(self, q, k, v, cos, sin):
            def rotate_half(x):
                x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
                return torch.cat((-x2, x1), dim=-1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(1, 2, 16, 32) for _ in range(3))
    cos, sin = torch.randn(16, 32), torch.randn(16, 32)
    m = RotaryAttention()
    for _ in range(3):
        m(q, k, v, cos, sin)


def _record_modules(tmp: Path, name: str, fn) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        with torch.no_grad():
            fn(torch)
    out = tmp / f"{name}.json"
    prof.export_chrome_trace(str(out))
    return out


def test_rotary_before_a_fused_call_is_not_a_repeated_step(tmp_path):
    path = _record_modules(tmp_path, "rotary", _rotary_sdpa)
    evs = _events(path)
    assert any(e.get("name") == "aten::_scaled_dot_product_flash_attention_for_cpu" for e in evs)
    r = analyze_file(str(path))
    rows = [g for g in r["reading"] if g["implementation"] == "cpu_fused"]
    assert rows
    e = rows[0]["expected"]
    assert not [x for x in e["extras"] if x["cause"] == "repeated_step"]  # rotary's mul/add are not scale/mask
    assert (e["expected"], e["ran"]) == (1, 1)
    assert {"aten::mul", "aten::add"} & set(e["outside"]["names"])


def _eager_float_softmax(torch):
    """HF eager attention (T5/Llama style): softmax of the scores in float32, cast back to the input dtype."""
    from torch import nn

    class EagerAttention(nn.Module):
        def forward(self, q, k, v):
            w = torch.matmul(q, k.transpose(-1, -2))
            w = torch.softmax(w.float(), dim=-1).to(q.dtype)
            return torch.matmul(w, v)

    q, k, v = (torch.randn(1, 2, 16, 32, dtype=torch.bfloat16) for _ in range(3))
    m = EagerAttention()
    for _ in range(3):
        m(q, k, v)


def test_a_cast_in_eager_attention_does_not_blame_the_math_backend(tmp_path):
    path = _record_modules(tmp_path, "eager_cast", _eager_float_softmax)
    evs = _events(path)
    assert any(e.get("name") == "aten::_to_copy" for e in evs)
    assert not any(e.get("name") == "aten::_scaled_dot_product_attention_math" for e in evs)
    r = analyze_file(str(path))
    casts = [x for g in r["reading"] if g["expected"] for x in g["expected"]["extras"] if x["cause"] == "dtype_cast"]
    assert casts
    assert all("math backend" not in x["what"] for x in casts)


def test_is_causal_with_dropout_on_the_cpu_is_not_told_to_pass_is_causal(tmp_path):
    from tests.test_kernel_reading import _sdpa

    path = _record(tmp_path, "causal_dropout", _sdpa((1, 2, 16, 32), (1, 2, 16, 32), is_causal=True, dropout_p=0.1))
    sdpa = next(e for e in _events(path) if e.get("name") == "aten::scaled_dot_product_attention")
    assert sdpa["args"]["Concrete Inputs"][5] == "True"  # is_causal as recorded
    r = analyze_file(str(path))
    masks = [x for g in r["reading"] if g["expected"] for x in g["expected"]["extras"]
             if x["cause"] == "mask_built_per_call"]
    assert masks
    for x in masks:
        assert "pass is_causal" not in x["fix"] and "already passed" in x["fix"]


def test_each_extra_names_the_events_that_earned_it_cpu(tmp_path):
    from tests.test_kernel_reading import _sdpa

    path = _record(tmp_path, "causal_math", _sdpa((1, 2, 16, 32), (1, 2, 16, 32), is_causal=True, dropout_p=0.1))
    ops = {}
    for e in _events(path):
        if e.get("cat") == "cpu_op":
            ops.setdefault(float(e["ts"]), set()).add(e["name"])
    r = analyze_file(str(path))
    extras = [x for g in r["reading"] if g["expected"] for x in g["expected"]["extras"]]
    assert extras
    for x in extras:
        ev = x["evidence"]
        assert ev["op_starts_us"] and not ev["kernel_correlations"]
        for ts in ev["op_starts_us"]:  # each is a recorded op of the extra's names
            assert ops.get(ts, set()) & set(x["names"]), (x["cause"], ts)


def test_each_extra_names_the_events_that_earned_it_gpu():
    import gzip

    from tests.conftest import shared_trace

    src = shared_trace("tl_h100_owlv2_eager_bmm_softmax")
    with gzip.open(src) as f:
        kernels = {e["args"]["correlation"]: e["name"] for e in json.load(f)["traceEvents"]
                   if e.get("cat") == "kernel" and "correlation" in e.get("args", {})}
    r = analyze_file(str(src))
    (row,) = [g for g in r["reading"] if g["layer_type"] == "Owlv2Attention"]
    layout = next(x for x in row["expected"]["extras"] if x["cause"] == "layout_copy")
    ids = layout["evidence"]["kernel_correlations"]
    assert ids and not layout["evidence"]["op_starts_us"]
    assert all("copy" in kernels[c] for c in ids)  # the layout copies: PyTorch's direct_copy / elementwise copy kernels


def _mha(need_weights: bool):
    def run(torch):
        from torch import nn

        m = nn.MultiheadAttention(32, 4, batch_first=True).eval()  # the fast path: eval, batch_first, no_grad
        x = torch.randn(2, 16, 32)
        for _ in range(3):
            m(x, x, x, need_weights=need_weights)
    return run


def _under_mha(events: list[dict]) -> set[str]:
    """The walker: cpu ops nested (by time) under aten::_native_multi_head_attention."""
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    outer = [e for e in ops if e["name"] == "aten::_native_multi_head_attention"]
    return {e["name"] for e in ops for o in outer
            if e is not o and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]}


def test_mha_need_weights_is_read_with_the_need_weights_false_fix(tmp_path):
    with_w = _record_modules(tmp_path, "mha_weights", _mha(True))
    without = _record_modules(tmp_path, "mha_no_weights", _mha(False))
    # what need_weights=True adds, from the raw events: the sum and division of the averaged weights
    added = _under_mha(_events(with_w)) - _under_mha(_events(without))
    assert {"aten::sum", "aten::div_"} <= added
    r = analyze_file(str(with_w))
    (row,) = [g for g in r["reading"] if g["implementation"] == "mha_fastpath"]
    extras = {x["cause"]: x for x in row["expected"]["extras"]}
    assert "unexplained" not in extras
    w = extras["attention_weights"]
    assert set(w["names"]) <= added | {"aten::fill_"} and "need_weights=False" in w["fix"]
    assert extras["mha_fast_path"]["names"] == ["aten::_transform_bias_rescale_qkv"]
    r0 = analyze_file(str(without))
    (row0,) = [g for g in r0["reading"] if g["implementation"] == "mha_fastpath"]
    assert "attention_weights" not in {x["cause"] for x in row0["expected"]["extras"]}


def _collect_mha(tmp: Path, need_weights: bool) -> Path:
    """nn.MultiheadAttention in training (the slow path) under tb_attn_plugin.profile, which tags each call."""
    torch = pytest.importorskip("torch")
    import tb_attn_plugin
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=need_weights)[0]

    torch.manual_seed(0)
    m, x = Block(), torch.randn(2, 16, 32)
    with tb_attn_plugin.profile(str(tmp), model=m, schedule=torch.profiler.schedule(wait=0, warmup=1, active=2)) as prof:
        for _ in range(3):
            m(x).sum().backward()
            prof.step()
    return Path(prof.traces[0])


def test_mha_with_need_weights_reads_as_the_explicit_path(tmp_path):
    import gzip
    from urllib.parse import parse_qs

    for need in (True, False):
        path = _collect_mha(tmp_path / str(need), need)
        with gzip.open(path) as f:
            evs = json.load(f)["traceEvents"]
        tag = next(e["name"] for e in evs if e.get("name", "").startswith("tb_attn::call "))
        assert parse_qs(tag[len("tb_attn::call "):])["need_weights"] == ["1" if need else "0"]
        ran_sdpa = any(e.get("name") == "aten::scaled_dot_product_attention" for e in evs)
        assert ran_sdpa is not need  # need_weights=True: no SDPA; False: SDPA ran
        (row,) = analyze_file(str(path))["reading"]
        e = row["expected"]
        if need:
            assert e["expected_steps"] == ["qk_matmul", "softmax", "av_matmul"]
            assert "need_weights=False" in e["summary"] and not [x for x in e["extras"] if x["cause"] == "unexplained"]
        else:
            assert "need_weights" not in e["summary"]
