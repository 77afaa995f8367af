"""Occupancy claims re-derived from the raw events (issue 46, item 6): the trace's est. achieved occupancy % is
kineto's calculation, a 0 comes from the 48 KiB default shared memory limit it assumes or from a small grid
(never from the launch API), and theoretical occupancy allocates registers per warp scheduler."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter

import pytest

from tb_attn_plugin.reading import occupancy
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import shared_trace

NVIDIA = ("tl_h100_bert_small_sdpa_flash", "tl_h100_owlv2_eager_bmm_softmax", "hta_a100_negative_log_softmax_fwdbwd")
# resident blocks per SM (CUDA C++ Programming Guide, compute capability table): the walker's own copy
MAX_BLOCKS = {(8, 0): 32, (9, 0): 32, (10, 0): 32}


def _load(name):
    with gzip.open(shared_trace(name)) as f:
        return json.load(f)


def _kineto(p, a):
    """kineto's kernelOccupancy (libkineto/src/DeviceProperties.cpp) with cuda_occupancy.h's rules, written
    from those sources: FUNC_SHMEM_LIMIT_DEFAULT (per-block limit sharedMemPerBlock + reserved 1 KiB),
    registers per sub-partition (4), blocks capped at grid / numSms, (int)(0.5 + occupancy x 100)."""
    def up(x, g):
        return -(-x // g) * g
    cc = (p["computeMajor"], p["computeMinor"])
    reserved = 1024 if cc[0] >= 8 else 0
    block, grid = math.prod(a["block"]), math.prod(a["grid"])
    warps = -(-block // 32)
    by_warps = p["maxThreadsPerMultiprocessor"] // 32 // warps
    per_warp = up(a["registers per thread"] * 32, 256)
    by_regs = (p["regsPerMultiprocessor"] // 4 // per_warp) * 4 // warps if per_warp else 1 << 30
    smem = up(a["shared memory"] + reserved, 128)
    by_smem = 0 if smem > p["sharedMemPerBlock"] + reserved else p["sharedMemPerMultiprocessor"] // smem
    blocks = min(by_warps, by_regs, by_smem, MAX_BLOCKS[cc], grid / p["numSms"])
    return int(0.5 + blocks * block / p["maxThreadsPerMultiprocessor"] * 100)


def _launches(d):
    api = {e["args"]["correlation"]: e["name"] for e in d["traceEvents"]
           if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    for e in d["traceEvents"]:
        a = e.get("args") or {}
        if e.get("cat") == "kernel" and "est. achieved occupancy %" in a:
            yield e, a, api.get(a.get("correlation"))


@pytest.mark.parametrize("name", NVIDIA)
def test_the_estimate_is_kinetos_calculation_not_a_measurement(name):
    """Every launch of the three NVIDIA traces: kineto's formula gives the recorded figure exactly; every
    launch over 48 KiB of shared memory reads 0 whatever its API, and the extended launch APIs below it do not."""
    d = _load(name)
    p = d["deviceProperties"][0]
    seen = Counter()
    for e, a, api in _launches(d):
        assert _kineto(p, a) == a["est. achieved occupancy %"], e["name"]
        if a["shared memory"] > p["sharedMemPerBlock"]:
            assert a["est. achieved occupancy %"] == 0
        seen[(api, a["shared memory"] > p["sharedMemPerBlock"], a["est. achieved occupancy %"] == 0)] += 1
    assert sum(seen.values()) > 0
    if name.startswith("hta_a100"):  # cudaLaunchKernelExC launches below 48 KiB read non-zero
        assert seen[("cudaLaunchKernelExC", False, False)] > 0


@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_h100_bert_small_sdpa_flash"])
def test_zero_estimates_are_explained_by_their_launches(name):
    """Each occupancy row that reads 0 says why from its own launches (the correlation ids it gives), and
    never blames the launch API."""
    d = _load(name)
    p = d["deviceProperties"][0]
    raw = {a["correlation"]: a for _, a, _ in _launches(d)}
    r = analyze_file(str(shared_trace(name)))
    rows = [o for lay in r["layers"] for o in lay.occupancy]
    assert rows
    zero_rows = 0
    for o in rows:
        assert "does not estimate" not in o.reading and "not an idle SM" not in o.reading
        if not o.zero_estimates:
            assert o.zero_estimate_cause is None
            continue
        zero_rows += 1
        assert o.evidence_correlations
        for c in o.evidence_correlations:
            a = raw[c]
            assert a["est. achieved occupancy %"] == 0
            want = ("shared memory over the default limit" if a["shared memory"] > p["sharedMemPerBlock"]
                    else "idle SMs")
            assert o.zero_estimate_cause in (want, "mixed")
        if o.zero_estimate_cause == "shared memory over the default limit":
            assert "49,152 bytes" in o.reading and "kineto" in o.reading
    if name.startswith("tl_h100_owlv2"):
        assert zero_rows  # its cuBLAS sm90 GEMMs use 231,424 bytes of shared memory


def test_small_grids_are_called_idle_sms():
    """BERT's flash launches: 16 blocks on 132 SMs. The rows count the raw launches with a grid below numSms."""
    name = "tl_h100_bert_small_sdpa_flash"
    d = _load(name)
    sms = d["deviceProperties"][0]["numSms"]
    small = Counter(e["name"] for e, a, _ in _launches(d) if math.prod(a["grid"]) < sms)
    r = analyze_file(str(shared_trace(name)))
    got = Counter()
    for lay in r["layers"]:
        for o in lay.occupancy:
            got[o.name] += o.small_grid_launches
            if o.small_grid_launches:
                assert "SMs idle" in o.reading or "leave SMs idle" in o.reading
    flash = [n for n in small if "flash_fwd_kernel" in n]
    assert flash and all(got[n] == small[n] for n in flash)


# B200 (compute capability 10.0) as cudaGetDeviceProperties reports it: 64 K registers and 2048 threads per SM,
# 228 KiB shared memory per SM, 48 KiB default per block, 148 SMs (CUDA C++ Programming Guide, CC 10.0 column).
B200 = {"computeMajor": 10, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 148,
        "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}


def test_registers_are_allocated_per_warp_scheduler_on_a_b200():
    """42 registers x 64 threads: 1344 -> 1536 registers per warp; a scheduler's 16,384 hold 10 warps, 40 per SM,
    20 blocks of 2 warps: 40 of 64 warps = 62.5% (CUDA's calculator), not 42 warps / 21 blocks / 65.62%."""
    dev = occupancy.device_limits(B200)
    got = occupancy.theoretical(42, 0, 64, dev)
    assert (got["blocks_per_sm"], got["warps_per_sm"], got["theoretical_pct"]) == (20, 40, 62.5)
    assert got["limited_by"] == ["registers"]


def test_every_arch_row_names_its_schedulers_and_a_device():
    assert occupancy.ARCH_SOURCE
    for cc, row in occupancy.ARCH_LIMITS.items():
        assert row.schedulers == 4 and row.example_device and row.max_blocks_per_sm in (16, 24, 32), cc
