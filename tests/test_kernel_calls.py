"""Traces in which only kernel names reveal attention: multi-kernel calls counted once under graph
replay, the safety net for unknown names, and --patterns turning them into calls."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import MLP, TraceBuilder

PAGED = "void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false, 512>(float*)"
REDUCE = "void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*)"
KV_WRITE = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"
QUANT, SAGE = "quant_per_block_int8_kernel", "void qk_int_sv_f16_attn_kernel<128u, 64u>(signed char*)"
UNKNOWN = "void zz_custom_attn_fwd_kernel<128, true>(Params)"


@pytest.fixture(autouse=True)
def _no_user_rows():
    yield
    P.set_user_families(())


def stage_us(r, stage):
    return sum(s["gpu_us"] for s in r["stages"] if s["stage"] == stage)


def test_split_kv_under_graph_replay_is_one_call_per_invocation(tmp_path):
    b = TraceBuilder()
    layers = 6
    b.graph_replay([[(KV_WRITE, 3.0), (PAGED, 40.0), (REDUCE, 4.0)] for _ in range(layers)], between=MLP)
    r = analyze_file(str(b.write(tmp_path / "paged.json")))
    assert r["calls"] == layers  # not 18 (kernels) nor 12 (attention + reduce kernels)
    assert stage_us(r, "fused") == pytest.approx(40.0 * layers)
    assert stage_us(r, "split_kv_reduce") == pytest.approx(4.0 * layers)
    assert stage_us(r, "kv_cache_write") == pytest.approx(3.0 * layers)
    assert r["attention_gpu_us"] == pytest.approx(47.0 * layers)  # the MLP between calls stays out
    assert r["unknown_kernels"] == [] and r["warnings"] == []
    (lay,) = r["layers"]
    assert lay.calls == layers and "graph replay" in lay.layer


def test_quantize_kernels_join_their_attention_kernel(tmp_path):
    b = TraceBuilder()
    # SageAttention: Q and K quantized, then the int8 attention kernel; an unrelated kernel between.
    b.graph_replay([[(QUANT, 2.0), (QUANT, 2.0), ("void at::native::reduce_kernel<mean>()", 1.0), (SAGE, 30.0)]
                    for _ in range(4)], between=MLP)
    r = analyze_file(str(b.write(tmp_path / "sage.json")))
    assert r["calls"] == 4
    assert stage_us(r, "quantize") == pytest.approx(16.0)
    assert {i["implementation"] for i in r["implementations"]} == {"sage"}


def test_compiled_region_kernels_with_ops_of_their_own_are_one_call(tmp_path):
    b = TraceBuilder()
    # Triton kernels under torch.compile: each has a cpu_op of its name, none is an attention op.
    b.compiled_region([[(QUANT, 2.0), (QUANT, 2.0), ("_attn_fwd", 25.0), ("triton_poi_fused_add_0", 3.0)]
                       for _ in range(3)])
    r = analyze_file(str(b.write(tmp_path / "compiled.json")))
    assert r["calls"] == 3
    assert stage_us(r, "fused") == pytest.approx(75.0) and stage_us(r, "quantize") == pytest.approx(12.0)
    assert {i["implementation"] for i in r["implementations"]} == {"triton_attention"}


def test_helper_kernels_never_make_a_call_alone(tmp_path):
    b = TraceBuilder()
    b.graph_replay([[(KV_WRITE, 3.0)] + MLP for _ in range(3)])  # cache writes with no attention kernel near
    r = analyze_file(str(b.write(tmp_path / "kv_only.json")))
    assert r["calls"] == 0 and r["attention_gpu_us"] == 0


def test_renamed_ops_and_modules_still_group_by_op(tmp_path):
    b = TraceBuilder()
    b.eager_calls([[(PAGED, 40.0), (REDUCE, 4.0)] for _ in range(3)])
    r = analyze_file(str(b.write(tmp_path / "eager.json")))
    assert r["calls"] == 3
    assert stage_us(r, "split_kv_reduce") == pytest.approx(12.0)


def test_safety_net_reports_an_unknown_attention_kernel(tmp_path):
    b = TraceBuilder()
    b.eager_calls([[(UNKNOWN, 50.0)] for _ in range(4)])
    b.graph_replay([[("void message_passing_kernel<float>()", 5.0)]])  # "sage" inside a word: not a hint
    r = analyze_file(str(b.write(tmp_path / "unknown.json")))
    assert r["calls"] == 0
    (row,) = r["unknown_kernels"]
    assert row["name"] == UNKNOWN and row["count"] == 4 and row["gpu_us"] == pytest.approx(200.0)
    assert row["share"] == pytest.approx(200.0 / 205.0, rel=1e-4)
    assert any("look" in w and "zz_custom_attn_fwd_kernel" in w for w in r["warnings"])
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    jsonschema.validate(r, json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text()))
    # The suggested row is valid TOML that the loader accepts and that matches the kernel.
    from tb_attn_plugin.attention.user_table import parse

    (fam,) = parse("suggested.toml", row["toml"].encode())
    assert fam.stage == "fused" and fam.pass_ == "fwd"
    import re

    assert re.search(fam.pattern, UNKNOWN)


def _cli(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "tb_attn_plugin.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_patterns_file_turns_the_unknown_kernel_into_calls(tmp_path):
    b = TraceBuilder()
    b.graph_replay([[(UNKNOWN, 50.0), ("zz_custom_attn_combine", 5.0)] for _ in range(5)], between=MLP)
    trace = b.write(tmp_path / "custom.json.gz")
    (before,) = json.loads(_cli("report", str(trace), "--json", "-q").stdout)["reports"]
    assert before["calls"] == 0 and len(before["unknown_kernels"]) == 2
    table = tmp_path / "mine.toml"
    table.write_text('''
[[family]]
name = "zz_attention"
pattern = "zz_custom_attn_fwd_kernel"
stage = "fused"
pass = "fwd"
implementation = "custom"
example = "zz_custom_attn_fwd_kernel<128>"
source = "our own kernels"

[[family]]
name = "zz_combine"
pattern = "^zz_custom_attn_combine$"
stage = "split_kv_reduce"
pass = "fwd"
example = "zz_custom_attn_combine"
source = "our own kernels"
''')
    p = _cli("report", str(trace), "--json", "-q", "--patterns", str(table))
    assert p.returncode == 0, p.stderr
    (after,) = json.loads(p.stdout)["reports"]
    assert after["calls"] == 5  # one per invocation: the combine kernel joins its call
    assert stage_us(after, "fused") == pytest.approx(250.0) and stage_us(after, "split_kv_reduce") == pytest.approx(25.0)
    assert after["unknown_kernels"] == [] and after["warnings"] == []
    assert {i["implementation"] for i in after["implementations"]} == {"custom"}
    assert after["kernel_table"]["user_families"] == 2
    text = _cli("report", str(trace), "-q").stdout
    assert "look like attention" in text or "unknown attention kernels" in text.lower()
