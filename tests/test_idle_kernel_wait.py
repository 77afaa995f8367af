"""Idle split three ways (issue 48, HTA's idle time breakdown): waiting on a synchronisation (the host
sat in cuda/hip*Synchronize), kernel wait (the launch of the work that ends the gap had already returned:
the host had issued it, the GPU sat between kernels), and waiting on the host (the rest). The figures
are re-derived from the raw events with this file's own walker (plain-Python interval unions)."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace

GPU = ("kernel", "gpu_memcpy", "gpu_memset")
SYNC = re.compile(r"^(cuda|hip)(Device|Stream|Event)Synchronize$")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
# A real kernel name (PyTorch's elementwise kernel, as the shared H100 traces hold it)
KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"


def merged_length(iv) -> float:
    out: list[list[float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return sum(b - a for a, b in out)


def walk(evs: list[dict]) -> dict[str, float]:
    """Idle, sync, kernel and host wait of the whole trace's GPU activities taken as one step."""
    acts = [e for e in evs if e.get("cat") in GPU]
    launch_end: dict[int, float] = {}
    for e in evs:
        if e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {}):
            launch_end[e["args"]["correlation"]] = e["ts"] + e["dur"]
    lo, hi = min(e["ts"] for e in acts), max(e["ts"] + e["dur"] for e in acts)
    busy = [(e["ts"], e["ts"] + e["dur"]) for e in acts]
    syncs = [(max(e["ts"], lo), min(e["ts"] + e["dur"], hi)) for e in evs
             if e.get("cat") in LAUNCH_CATS and SYNC.match(e["name"]) and e["ts"] < hi and e["ts"] + e["dur"] > lo]
    # gaps of the union, and the earliest launch end among the activities starting where each gap ends
    waits = []
    reach = None
    starts: dict[float, float] = {}
    for e in acts:
        le = launch_end.get((e.get("args") or {}).get("correlation"))
        if le is not None:
            starts[e["ts"]] = min(starts.get(e["ts"], le), le)
    for a, b in sorted(busy):
        if reach is not None and a > reach and a in starts and a > max(reach, starts[a]):
            waits.append((max(reach, starts[a]), a))
        reach = b if reach is None else max(reach, b)
    n_busy = merged_length(busy)
    n_sync = merged_length(busy + syncs)
    n_kernel = merged_length(busy + syncs + waits)
    return {"idle": hi - lo - n_busy, "sync": n_sync - n_busy, "kernel": n_kernel - n_sync, "host": hi - lo - n_kernel}


def _ev(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat not in GPU else 0, "tid": 1 if cat not in GPU else 7,
            "ts": 1_000_000.0 + ts, "dur": dur, "args": args}


def test_each_gap_is_split_by_when_its_kernel_was_issued(tmp_path):
    """K2 issued long before its gap (kernel wait 5 µs); K3 issued 17 µs into its gap (host 17, kernel 3);
    K4's gap starts under cudaDeviceSynchronize (sync 10), then 3 µs before its launch returns (host),
    then 7 µs (kernel)."""
    evs = [_ev("cpu_op", "aten::fill_", 0, 80)]
    for i, (launch, k0, k1) in enumerate([(0, 10, 20), (5, 25, 35), (50, 55, 60), (71, 80, 90)]):
        evs.append(_ev("cuda_runtime", "cudaLaunchKernel", launch, 2, correlation=100 + i))
        evs.append(_ev("kernel", KERNEL, k0, k1 - k0, correlation=100 + i, stream=7, device=0))
    evs.append(_ev("cuda_runtime", "cudaDeviceSynchronize", 60, 10))
    path = tmp_path / "gaps.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    assert walk(evs) == {"idle": 45.0, "sync": 10.0, "kernel": 15.0, "host": 20.0}
    t = analyze_file(str(path))["overview"]["total"]
    assert (t["idle_us"], t["idle_sync_us"], t["idle_kernel_us"], t["idle_host_us"]) == (45.0, 10.0, 15.0, 20.0)


@pytest.mark.parametrize("name", ["tl_h100_bert_small_sdpa_flash", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"])
def test_kernel_wait_on_the_shared_traces(name):
    """One step each (BERT-small: none marked; FLUX: its kernels replayed from a hipGraph are issued at
    once, so the gaps between them are kernel wait)."""
    path = shared_trace(name)
    evs = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    r = analyze_file(str(path))
    if len(r["overview"]["steps"]) != 1:
        pytest.skip(f"{name} has {len(r['overview']['steps'])} steps; the walker takes the trace as one")
    want = walk(evs)
    t = r["overview"]["total"]
    assert t["idle_us"] == pytest.approx(want["idle"], abs=0.01)
    assert t["idle_sync_us"] == pytest.approx(want["sync"], abs=0.01)
    assert t["idle_kernel_us"] == pytest.approx(want["kernel"], abs=0.01)
    assert t["idle_host_us"] == pytest.approx(want["host"], abs=0.01)
    assert want["kernel"] > 0


def test_without_launches_kernel_wait_is_unknown_not_zero(tmp_path):
    """Kernels whose launches the trace lacks (no correlation to any runtime call): whether their gaps
    were kernel wait cannot be told, so it is null and the host's wait is idle minus sync."""
    evs = [_ev("cpu_op", "aten::fill_", 0, 80)]
    for i, (k0, k1) in enumerate([(10, 20), (25, 35), (55, 60)]):
        evs.append(_ev("kernel", KERNEL, k0, k1 - k0, stream=7, device=0))
    path = tmp_path / "no_launches.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    t = analyze_file(str(path))["overview"]["total"]
    assert t["idle_us"] == 25.0 and t["idle_kernel_us"] is None
    assert t["idle_host_us"] + t["idle_sync_us"] == 25.0
