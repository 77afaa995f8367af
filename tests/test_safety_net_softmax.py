"""The safety net for softmax kernels between batched GEMMs (issue 45, "What to build" 2): it warns
whenever a softmax kernel sits between batched GEMMs and no call claims it, also when the kernel path
cannot claim it because the softmax kernel's name is in no kernel family (FasterTransformer's and
TensorRT-LLM's unfused attention softmax), with ops that say nothing and in a kernels-only trace. A
log-softmax, or a softmax between unbatched GEMMs, stays quiet.
"""

from __future__ import annotations

import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.report.build import analyze_file
from tests.kernel_traces import TraceBuilder
from tests.test_kernels_only import AV, PROJ, QK, _kernels

# NVIDIA/FasterTransformer src/fastertransformer/kernels/unfused_attention_kernels.cu: template<typename T,
# typename T_IN, int ITEMS_PER_THREAD> __global__ void softmax_kernel(T* attn_score, const T_IN* qk, const T*
# attn_mask, const T* linear_bias_slopes, int batch_size, int head_num, int q_length, int k_length, float qk_scale),
# demangled as the profiler writes it; launched on grid (q_length, batch, heads)
FT_SOFTMAX = ("void fastertransformer::softmax_kernel<__half, __half, 4>(__half*, __half const*, __half const*, "
              "__half const*, int, int, int, int, float)", [512, 1, 16])
LOG_SOFTMAX = ("void fastertransformer::log_softmax_kernel<__half>(__half*, __half const*, int)", [512, 1, 1])


def test_ft_softmax_is_in_no_family():
    assert P.kernel_family(FT_SOFTMAX[0]) is None  # else the kernel path would claim it: no case for the net


def _custom_ops(b, softmax, n=3):
    """Ops named by a custom library launch QKᵀ, the softmax and AV: nothing in their names says attention."""
    for _ in range(n):
        t = b.t
        for j, (name, grid) in enumerate((QK, softmax, AV)):
            b.op(f"mylib::step_{j}", t + 12 * j, 10.0)
            ev = b.kernel(name, b.launch(t + 12 * j + 1), (100.0, 200.0, 80.0)[j])
            ev["args"]["grid"] = grid
        b.t += 50


def test_unknown_softmax_between_batched_gemms_under_custom_ops_warns(tmp_path):
    b = TraceBuilder()
    _custom_ops(b, FT_SOFTMAX)
    r = analyze_file(str(b.write(tmp_path / "ft.json")))
    assert r["calls"] == 0
    (line,) = [w for w in r["warnings"] if "softmax kernel" in w]
    assert line.startswith("3 softmax kernels sit between batched GEMMs") and "(600.0 µs)" in line
    assert "1 of their names match no kernel family" in line and "fastertransformer::softmax_kernel" in line


def test_unknown_softmax_in_a_kernels_only_trace_warns(tmp_path):
    b = TraceBuilder()
    layer = [(PROJ, 20.0), (QK, 100.0), (FT_SOFTMAX, 200.0), (AV, 80.0), (PROJ, 20.0)]
    _kernels(b, layer * 4)
    r = analyze_file(str(b.write(tmp_path / "ft_bare.json")))
    assert r["calls"] == 0  # the kernel path knows no such softmax
    (line,) = [w for w in r["warnings"] if "softmax kernel" in w]
    assert line.startswith("4 softmax kernels sit between batched GEMMs") and "(800.0 µs)" in line


@pytest.mark.parametrize("case", ["log_softmax", "unbatched"])
def test_log_softmax_or_unbatched_gemms_stay_quiet(tmp_path, case):
    b = TraceBuilder()
    if case == "log_softmax":
        _custom_ops(b, LOG_SOFTMAX)
    else:
        _kernels(b, [(PROJ, 20.0), (FT_SOFTMAX, 10.0), (PROJ, 20.0)] * 3)
    r = analyze_file(str(b.write(tmp_path / f"{case}.json")))
    assert r["calls"] == 0 and not any("softmax kernel" in w for w in r["warnings"])
