"""Attention that no module scope or aten op names: custom autograd Functions and torch.library ops
found by the op table, whole calls in both passes (backward-only ones too), FlashAttention-3 and
SageAttention kernel names by their structure, and shapes taken from a call's QKᵀ/softmax children.

The CPU traces are recorded here with torch.profiler; the GPU traces are built event by event
(tests/kernel_traces.py) from real kernel names, each with its public source.
"""

from __future__ import annotations

import json

import msgspec
import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import TraceBuilder

B, L, H, D = 2, 32, 4, 16  # L != D, so a transposed operand cannot pass for the other


def stages(r, pass_=None):
    return {(s["stage"], s["pass"]) for s in r["stages"] if pass_ in (None, s["pass"])}


# --- CPU traces recorded with torch.profiler ------------------------------------------------------

_RECORD = r'''
import sys, torch
from torch.profiler import ProfilerActivity, profile

B, L, H, D = 2, 32, 4, 16
E = H * D

def attend(q, k, v):
    p = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * D ** -0.5, -1)
    return torch.matmul(p, v), p

def attend_backward(do, q, k, v, p):
    dv = torch.matmul(p.transpose(-2, -1), do)
    ds = torch.ops.aten._softmax_backward_data(torch.matmul(do, v.transpose(-2, -1)), p, -1, p.dtype)
    return torch.matmul(ds, k) * D ** -0.5, torch.matmul(ds.transpose(-2, -1), q) * D ** -0.5, dv

# (a) a custom autograd Function named like FlashAttention's (flash_attn/flash_attn_interface.py)
class FlashAttnVarlenFunc(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        o, p = attend(q, k, v)
        ctx.save_for_backward(q, k, v, p)
        return o

    @staticmethod
    def backward(ctx, do):
        return attend_backward(do, *ctx.saved_tensors)

class Block(torch.nn.Module):  # a name that says nothing about attention
    def __init__(self):
        super().__init__()
        self.qkv, self.o = torch.nn.Linear(E, 3 * E), torch.nn.Linear(E, E)

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, L, 3, H, D).permute(2, 0, 3, 1, 4)
        return self.o(FlashAttnVarlenFunc.apply(q, k, v).transpose(1, 2).reshape(B, L, E))

# (b) torch.library custom ops under FlashAttention's names (flash_attn_interface.py registers
# flash_attn::_flash_attn_forward/_backward), q/k/v laid out (B, L, H, D) as flash-attn does, and two
# ops of attention namespaces that are not attention (flashinfer::rmsnorm; FA3's scheduler metadata)
@torch.library.custom_op("flash_attn::_flash_attn_forward", mutates_args=())
def fa_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    o, p = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return o.transpose(1, 2).contiguous(), p

@torch.library.custom_op("flash_attn::_flash_attn_backward", mutates_args=())
def fa_backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    t = lambda x: x.transpose(1, 2)
    return tuple(t(g).contiguous() for g in attend_backward(t(do), t(q), t(k), t(v), p))

def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs, output[1])

fa_forward.register_autograd(lambda ctx, do, _: fa_backward(do, *ctx.saved_tensors), setup_context=_setup)

@torch.library.custom_op("flashinfer::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

@torch.library.custom_op("flash_attn_3::get_scheduler_metadata", mutates_args=())
def scheduler_metadata(lens: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(lens, 0)

def record(path, fn, shapes=True):
    fn()  # warm-up outside the window
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        fn()
    prof.export_chrome_trace(path)

out = sys.argv[1]
torch.manual_seed(0)
blocks = torch.nn.Sequential(Block(), Block())
x = torch.randn(B, L, E)
record(f"{out}/function.json", lambda: blocks(x).sum().backward())

def backward_only():
    loss = blocks(x).sum()  # forward before the window
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss.backward()
    prof.export_chrome_trace(f"{out}/function_backward_only.json")
backward_only()

q, k, v = (torch.randn(B, L, H, D, requires_grad=True) for _ in range(3))
def custom_ops():
    o = fa_forward(rmsnorm(q.detach()), k, v)[0]
    scheduler_metadata(torch.tensor([L] * B))
    o.sum().backward()
record(f"{out}/custom_op.json", custom_ops)
loss = fa_forward(q, k, v)[0].sum()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    loss.backward()
prof.export_chrome_trace(f"{out}/custom_op_backward_only.json")

# (c) nn.MultiheadAttention in eval under no_grad: the native fast path
mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
with torch.no_grad():
    record(f"{out}/mha_fastpath.json", lambda: mha(x, x, x, need_weights=False))
'''


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    pytest.importorskip("torch")
    import subprocess
    import sys

    from tests.conftest import REPO

    out = tmp_path_factory.mktemp("unseen")
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + _RECORD, str(out)],
                   check=True, timeout=600, capture_output=True)
    return out


def _op_names(path) -> set[str]:
    doc = json.loads(path.read_text())
    return {e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}


def test_autograd_function_is_a_call_with_both_passes(recorded):
    path = recorded / "function.json"
    assert "FlashAttnVarlenFuncBackward" in _op_names(path)  # autograd's name for the Function's node
    r = analyze_file(str(path))
    assert r["calls"] == 2
    assert {i["layer_type"] for i in r["implementations"]} == {"FlashAttnVarlenFunc"}
    # forward: QKᵀ, scale, softmax, AV; backward: the ops under the Function's node, in backward order
    assert {("qk_matmul", "fwd"), ("softmax", "fwd"), ("av_matmul", "fwd")} <= stages(r)
    assert {("av_matmul", "bwd"), ("softmax", "bwd"), ("qk_matmul", "bwd")} <= stages(r, "bwd")
    bwd = sum(s["cpu_us"] for s in r["stages"] if s["pass"] == "bwd")
    fwd = sum(s["cpu_us"] for s in r["stages"] if s["pass"] == "fwd")
    assert bwd > 0 and fwd > 0
    for lay in r["layers"]:
        # the shape from the QKᵀ matmul inside the Function (no op carries it)
        assert lay.shape.q_len == L and lay.shape.k_len == L and lay.shape.head_dim == D
        assert lay.shape.batch == B and lay.shape.q_heads == H
        assert lay.flops == pytest.approx(4 * B * H * L * L * D * 3.5)  # forward + backward (2.5x)
    assert not [w for w in r["warnings"] if "backward only" in w]


def test_function_backward_without_its_forward_is_a_backward_only_call(recorded):
    r = analyze_file(str(recorded / "function_backward_only.json"))
    assert r["calls"] == 2
    assert all(s["pass"] == "bwd" for s in r["stages"]) and r["attention_cpu_us"] > 0
    assert {("av_matmul", "bwd"), ("softmax", "bwd"), ("qk_matmul", "bwd")} <= stages(r)
    assert all("(backward only)" in lay.layer and "no launching op" not in lay.layer for lay in r["layers"])
    assert any("2 attention calls are backward only" in w for w in r["warnings"])


def test_custom_op_in_an_attention_namespace_and_its_neighbours(recorded):
    path = recorded / "custom_op.json"
    names = _op_names(path)
    assert {"flash_attn::_flash_attn_forward", "flash_attn::_flash_attn_backward", "flashinfer::rmsnorm",
            "flash_attn_3::get_scheduler_metadata"} <= names
    r = analyze_file(str(path))
    assert r["calls"] == 1  # rmsnorm and the scheduler metadata share a namespace, not the job
    (lay,) = r["layers"]
    assert lay.implementation == "flash_attn::_flash_attn_forward"
    assert stages(r) == {("fused", "fwd"), ("fused", "bwd")}
    assert msgspec.to_builtins(lay.shape) == {"batch": B, "q_heads": H, "kv_heads": H, "q_len": L, "k_len": L, "head_dim": D,
                            "batch_heads": B * H}
    assert lay.flops == pytest.approx(4 * B * H * L * L * D * 3.5)
    ops = {o["name"] for o in r["ops"]}
    assert "flashinfer::rmsnorm" not in ops and "flash_attn_3::get_scheduler_metadata" not in ops


def test_custom_backward_op_without_its_forward_is_a_backward_only_call(recorded):
    r = analyze_file(str(recorded / "custom_op_backward_only.json"))
    assert r["calls"] == 1
    assert stages(r) == {("fused", "bwd")}
    (lay,) = r["layers"]
    assert lay.layer.endswith("(backward only)")
    assert any("backward only" in w for w in r["warnings"])


def test_mha_fast_path_takes_its_shape_from_its_children(recorded):
    path = recorded / "mha_fastpath.json"
    assert "aten::_native_multi_head_attention" in _op_names(path)  # the CPU really took the fast path
    r = analyze_file(str(path))
    assert r["calls"] == 1
    (lay,) = r["layers"]
    assert lay.implementation == "mha_fastpath"
    assert msgspec.to_builtins(lay.shape) == {"batch": B, "q_heads": H, "kv_heads": H, "q_len": L, "k_len": L, "head_dim": D,
                            "batch_heads": B * H}
    assert lay.dtype == "float32"
    assert lay.flops == pytest.approx(4 * B * H * L * L * D)  # inference: forward only
    assert lay.tflops is not None and lay.tflops > 0
    assert lay.score_bytes == B * H * L * L * 4  # one fp32 score block per call
    assert r["roofline"]["layers"] and r["roofline"]["layers"][0]["score_bytes"] == B * H * L * L * 4


# --- the op table ------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", P.ATTENTION_OP_RULES, ids=lambda r: r.rule)
def test_op_rule_matches_its_example(rule):
    assert P.op_rule(rule.example) == rule, f"{rule.example!r} is taken by {P.op_rule(rule.example)}"
    assert rule.source and rule.role in ("fused", "function", None)


@pytest.mark.parametrize("name,role", [
    ("FlashAttnFunc", "function"), ("FlashAttnQKVPackedFunc", "function"), ("RopeLoraFlashAttnVarlenFunc", "function"),
    ("AttnFuncWithCPAndKVP2P", "function"), ("RingFlashAttnVarlenFunc", "function"), ("_fMHA", "function"),
    ("flash_attn_3::fwd", "fused"), ("flash_attn_3::bwd", "fused"), ("sgl_kernel::fwd_kvcache_mla", "fused"),
    ("vllm::unified_attention", "fused"), ("aiter::mha_fwd", "fused"),
    # attention namespaces hold other ops too (flashinfer python/flashinfer/norm.py, comm/, gemm/)
    ("flashinfer::rmsnorm", None), ("flashinfer::dsv3_router_gemm_op", None), ("aiter::_groupnorm_run", None),
    ("flash_attn_3::get_scheduler_metadata", None), ("LinearFunction", None), ("aten::bmm", None),
])
def test_op_names(name, role):
    rule = P.op_rule(name)
    assert (rule.role if rule else None) == role
    assert (P.attention_function(name) is not None) == (role == "function")
    assert P.is_vendor_op(name) == (role == "fused")


def test_backward_node_names_find_their_function():
    assert P.attention_function_backward("RopeLoraFlashAttnVarlenFuncBackward").rule == "flash_attn_functions"
    assert P.attention_function_backward("FusedAttnFuncBackward").rule == "attention_functions"
    assert P.attention_function_backward("FlashAttnVarlenFunc") is None  # the forward op is no node
    assert P.attention_function_backward("MmBackward0") is None


# --- kernel families by name structure -----------------------------------------------------------

# As issue 24 quotes them from a DeepSeek-V3-style H800 trace (mid-2024 FA3, MLA head dims 192/128)
FA3_FWD_2024 = "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, …>"
FA3_BWD_2024 = "void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<…, cutlass::arch::Sm90, …>, …>>"
FA3_PRE = ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<192> >, "
           "cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, true> >(flash::FlashAttnBwdPreprocess<...>::Params)")
FA3_POST = ("void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<cute::C<64>, cute::C<128>, "
            "cute::C<192> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, 256, cute::tuple<cute::C<1>, cute::C<1> >, "
            "true, false, false, true> >(flash::FlashAttnBwdPostprocessConvertdQ<...>::Params)")
# CUTLASS 3 FP8 GEMM (include/cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized_fp8.hpp): the
# same cutlass::device_kernel<...> wrapper as FA3, and no flash:: inside
FP8_GEMM = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
            "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<4, "
            "cute::tuple<cute::C<1>, cute::C<2>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum>, "
            "cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, cutlass::float_e4m3_t, cute::tuple<long, cute::C<1>, long>, "
            "cutlass::float_e4m3_t, cute::tuple<long, cute::C<1>, long>, cute::TiledMMA<...> >, "
            "cutlass::epilogue::collective::CollectiveEpilogue<...>, void> >(cutlass::gemm::kernel::GemmUniversal<...>::Params)")
ROTARY = "void rotary_kernel<__nv_bfloat16>(RotaryParams)"  # named like no attention family


@pytest.mark.parametrize("name,family,stage,pass_", [
    (FA3_FWD_2024, "flash_attn_3_fwd", "fused", "fwd"),
    (FA3_BWD_2024, "flash_attn_3_bwd", "fused", "bwd"),
    (FA3_PRE, "flash_bwd_preprocess", "preprocess", "bwd"),
    (FA3_POST, "flash_bwd_postprocess", "postprocess", "bwd"),
    # the early FA3 backward was also named compute_attn_ws, over the backward mainloop (hopper/flash_bwd_kernel.h)
    ("void flash::compute_attn_ws<Flash_bwd_kernel_traits<128, 64, 128, 12, 2, false, 2, cutlass::half_t>, "
     "flash::SingleTileScheduler, flash::FixedSeqLenTraits>(flash::CollectiveMainloopBwd<...>::Params)", "flash_attn_3_bwd", "fused", "bwd"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
     "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<176>, cute::C<192> >, 192, "
     "cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, false, false, true, true, false, false, false>, "
     "flash::CollectiveEpilogueFwd<...>, flash::VarlenDynamicPersistentTileScheduler<128, 176, 384, 128, false, true, true, true> > > >(...)",
     "flash_attn_3_fwd", "fused", "fwd"),
    # FA2 (csrc/flash_attn/src: flash:: kernels; early releases declared them at global scope)
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, true, false, false, false, true, true, false, false>(Flash_fwd_params)", "flash_attn_2_fwd", "fused", "fwd"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>, true, false, false, false, true, true, false>(Flash_fwd_params)", "flash_attn_2_fwd_traits", "fused", "fwd"),
    ("void flash::flash_bwd_convert_dkv_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t> >(Flash_bwd_params)", "flash_bwd_postprocess", "postprocess", "bwd"),
    ("void flash::flash_bwd_clear_dkvaccum_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t> >(Flash_bwd_params)", "flash_bwd_preprocess", "preprocess", "bwd"),
    # FA4 (flash_attn/cute, CuTe DSL kernel names)
    ("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm90FlashAttentionForwardSm90_object_at__tensorptrbf16gmemalign16odiv8_0", "flash_attn_4_cute", "fused", ""),
    # SageAttention: thu-ml/SageAttention csrc/qattn (CUDA), ROCm/aiter Triton (sage_fwd, sage_quant_kernel)
    ("sage_fwd", "sage_attention_aiter", "fused", "fwd"),
    ("sage_quant_kernel", "sage_quantize_triton", "quantize", "fwd"),
    ("void qk_int8_sv_f8_accum_f32_attn_inst_buf_kernel<128u, 64u, 128u>(signed char*)", "sage_attention", "fused", "fwd"),
    # not attention: a GEMM in the same wrapper
    (FP8_GEMM, "gemm", "matmul", ""),
])
def test_kernel_families_by_structure(name, family, stage, pass_):
    fam = P.kernel_family(name)
    assert fam is not None and (fam.family, fam.stage, fam.pass_) == (family, stage, pass_)


# --- a Hopper training step: FA3 under a custom Function, forward and backward --------------------

def _seq(ev: dict, seq: int) -> dict:
    ev["args"]["Sequence number"] = seq
    ev["args"]["Fwd thread id"] = 0
    return ev


def _launch_all(b: TraceBuilder, ts: float, kernels) -> None:
    for i, (name, dur) in enumerate(kernels):
        b.kernel(name, b.launch(ts + 1 + 3 * i), dur)


def _fa3_step(b: TraceBuilder, layers: int, forward: bool, seq0: int = 100) -> None:
    """``layers`` calls of a RopeLora FA3 Function (rotary, FA3, projection GEMM launched under it), with
    an FP8 MoE GEMM between layers; then, in backward, each Function's node (dQ/dKV GEMMs, rotary
    backward, FA3 preprocess + backward + dQ conversion). ``forward``: the forward is in the window."""
    if forward:
        for i in range(layers):
            t = b.t
            _seq(b.op("RopeLoraFlashAttnVarlenFunc", t, 80.0), seq0 + i)
            _launch_all(b, t, [(ROTARY, 3.0), (FA3_FWD_2024, 50.0)])
            b.op("aten::mm", t + 20, 20.0)
            _launch_all(b, t + 20, [(FP8_GEMM, 9.0)])
            b.op("aten::_scaled_mm", t + 90, 10.0)
            _launch_all(b, t + 90, [(FP8_GEMM, 11.0)])  # the MoE GEMM: outside attention
            b.t += 120
    for i in reversed(range(layers)):
        t = b.t
        b.op("autograd::engine::evaluate_function: RopeLoraFlashAttnVarlenFuncBackward", t, 100.0)
        _seq(b.op("RopeLoraFlashAttnVarlenFuncBackward", t + 1, 98.0), seq0 + i)
        b.op("aten::mm", t + 2, 15.0)
        _launch_all(b, t + 2, [(FP8_GEMM, 7.0), (FP8_GEMM, 7.0)])
        _launch_all(b, t + 20, [(FA3_PRE, 2.0), (FA3_BWD_2024, 120.0), (FA3_POST, 3.0), (ROTARY, 4.0)])
        b.t += 120


def test_fa3_training_step_whole_calls_both_passes(tmp_path):
    b = TraceBuilder()
    _fa3_step(b, layers=4, forward=True)
    r = analyze_file(str(b.write(tmp_path / "fa3.json")))
    assert r["calls"] == 4
    assert {i["implementation"] for i in r["implementations"]} == {"flash_attn"}
    assert {i["layer_type"] for i in r["implementations"]} == {"RopeLoraFlashAttnVarlenFunc"}
    got = {(s["stage"], s["pass"]): s["gpu_us"] for s in r["stages"]}
    assert got[("fused", "fwd")] == pytest.approx(4 * 50.0)
    assert got[("fused", "bwd")] == pytest.approx(4 * 120.0)
    assert got[("preprocess", "bwd")] == pytest.approx(4 * 2.0)
    assert got[("postprocess", "bwd")] == pytest.approx(4 * 3.0)
    assert got[("qkv_proj", "fwd")] == pytest.approx(4 * 9.0)  # the projection launched under the Function
    assert got[("qkv_proj", "bwd")] == pytest.approx(4 * 14.0)  # dQ/dKV GEMMs of its backward
    assert got[("other", "fwd")] == pytest.approx(4 * 3.0) and got[("other", "bwd")] == pytest.approx(4 * 4.0)
    # every kernel under the Functions and their nodes, and not one MoE GEMM between them
    assert r["attention_gpu_us"] == pytest.approx(4 * (3 + 50 + 9 + 14 + 2 + 120 + 3 + 4))
    assert not any("no launching op" in lay.layer for lay in r["layers"])
    assert r["unknown_kernels"] == [] and not [w for w in r["warnings"] if "backward only" in w]


def test_fa3_backward_whose_forward_ran_before_the_window(tmp_path):
    b = TraceBuilder()
    _fa3_step(b, layers=4, forward=False)
    r = analyze_file(str(b.write(tmp_path / "fa3_bwd.json")))
    assert r["calls"] == 4
    assert {s["pass"] for s in r["stages"]} == {"bwd"}
    # all 6 kernels of each node: FA3's three, and the two GEMMs and the rotary backward beside them
    assert r["attention_gpu_us"] == pytest.approx(4 * (14 + 2 + 120 + 3 + 4))
    assert sum(k["count"] for k in r["kernels"]) == 4 * 6
    assert all(lay.layer.endswith("(backward only)") and "no launching op" not in lay.layer for lay in r["layers"])
    assert any("4 attention calls are backward only" in w for w in r["warnings"])


def test_fused_backward_kernel_under_an_unknown_node_becomes_a_backward_only_call(tmp_path):
    """A Function the table does not know: its backward node launched the FA3 kernels itself."""
    b = TraceBuilder()
    t = b.t
    b.op("autograd::engine::evaluate_function: MyKernelsBackward", t, 100.0)
    _seq(b.op("MyKernelsBackward", t + 1, 98.0), 7)
    _launch_all(b, t + 2, [(FA3_PRE, 2.0), (FA3_BWD_2024, 120.0), (FA3_POST, 3.0), (ROTARY, 4.0)])
    b.t += 120
    r = analyze_file(str(b.write(tmp_path / "unknown_node.json")))
    assert r["calls"] == 1
    (lay,) = r["layers"]
    assert lay.gpu_us == pytest.approx(2 + 120 + 3 + 4)  # the rotary kernel too: its op is the call's
    assert "no launching op" not in lay.layer and lay.layer.endswith("(backward only)")


def test_fp8_gemm_in_cutlass_device_kernel_is_not_attention(tmp_path):
    b = TraceBuilder()
    for i in range(6):
        t = b.t
        b.op("aten::_scaled_mm", t, 30.0)
        _launch_all(b, t, [(FP8_GEMM, 20.0)])
        b.t += 40
    r = analyze_file(str(b.write(tmp_path / "fp8.json")))
    assert r["calls"] == 0 and r["attention_gpu_us"] == 0


def test_function_backward_joins_the_tagged_call_inside_its_forward(tmp_path):
    """The collector's tag inside a Function makes the call; the Function's node is its backward."""
    from tb_attn_plugin.format import tags

    b = TraceBuilder()
    t = b.t
    _seq(b.op("RopeLoraFlashAttnVarlenFunc", t, 80.0), 5)
    b.op(tags.call_name(layer="layers.0.attn", impl="flash_attn"), t + 1, 70.0, cat="user_annotation")
    _launch_all(b, t + 2, [(FA3_FWD_2024, 50.0)])
    b.t += 120
    t = b.t
    _seq(b.op("RopeLoraFlashAttnVarlenFuncBackward", t, 98.0), 5)
    _launch_all(b, t + 2, [(FA3_PRE, 2.0), (FA3_BWD_2024, 120.0), (FA3_POST, 3.0)])
    b.t += 120
    r = analyze_file(str(b.write(tmp_path / "tagged.json")))
    assert r["calls"] == 1
    (lay,) = r["layers"]
    assert lay.layer == "layers.0.attn" and lay.gpu_us == pytest.approx(50 + 2 + 120 + 3)
    assert not [w for w in r["warnings"] if "backward only" in w]


def test_cli_patterns_lists_the_op_table():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "patterns", "--json"], capture_output=True, text=True,
                       timeout=120)
    ops = json.loads(p.stdout)["ops"]
    assert [o["name"] for o in ops] == [r.rule for r in P.ATTENTION_OP_RULES]
    assert all(o["example"] and o["source"] for o in ops)
