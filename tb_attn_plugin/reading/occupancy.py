"""Theoretical occupancy of a CUDA kernel from its launch (registers per thread, shared memory, block) and
the device, by the CUDA occupancy rules, with the limit that binds.

Conventions: occupancy = resident warps per SM / the SM's maximum warps, in percent. Registers are
allocated per warp in units of 256 (rounded up) inside one of the SM's warp schedulers (sub-partitions),
each holding a quarter of the register file, so the warps that fit are counted per scheduler first;
shared memory per block in units of 128 bytes plus the runtime's reserved 1 KiB per block (compute
capability 8.0 and later); the shared memory per SM is the trace's ``sharedMemPerMultiprocessor`` (the
largest carveout: the carveout a launch got is not recorded). The per-SM limits the trace's
``deviceProperties`` lacks (resident blocks, schedulers, allocation units) come from ARCH_LIMITS. Source:
NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" table, and
cuda_occupancy.h (cudaOccMaxBlocksPerSMRegsLimit: numRegsPerSubPartition = regsPerMultiprocessor /
numSubPartitions).

``kineto_estimate`` is the trace's ``est. achieved occupancy %`` recomputed: kineto does not measure it.
pytorch/kineto libkineto/src/DeviceProperties.cpp ``kernelOccupancy`` calls cuda_occupancy.h's
cudaOccMaxActiveBlocksPerMultiprocessor with ``shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT`` and
``maxDynamicSharedSizeBytes = 0`` (the CUPTI kernel record does not say whether the kernel opted in to
more shared memory), so any launch over ``sharedMemPerBlock`` (48 KiB) gets 0 resident blocks; it then
caps the blocks per SM at grid / numSms and writes (int)(0.5 + blocks x threads / maxThreadsPerMultiprocessor
x 100). A 0% is therefore either a launch over 48 KiB of shared memory or a grid too small to fill the SMs.
"""

from __future__ import annotations

from typing import Any

import msgspec

REG_UNIT = 256  # registers are allocated per warp in units of 256
SMEM_UNIT = 128  # bytes
MAX_REGS_PER_THREAD = 255


class ArchLimits(msgspec.Struct, frozen=True):
    max_blocks_per_sm: int
    reserved_smem_per_block: int  # bytes the runtime keeps per block
    schedulers: int  # warp schedulers (sub-partitions) per SM; each holds 1/schedulers of the register file
    example_device: str


ARCH_SOURCE = ("NVIDIA CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability' (resident "
               "blocks per SM, 4 warp schedulers per SM from 7.x) and the architecture whitepapers "
               "(Volta, Turing, Ampere GA100/GA102, Ada, Hopper, Blackwell: 4 processing blocks per SM)")
# compute capability -> limits, one row per architecture (source: ARCH_SOURCE)
ARCH_LIMITS: dict[str, ArchLimits] = {
    "7.0": ArchLimits(32, 0, 4, "V100"),
    "7.5": ArchLimits(16, 0, 4, "T4"),
    "8.0": ArchLimits(32, 1024, 4, "A100"),
    "8.6": ArchLimits(16, 1024, 4, "A10, RTX 3090"),
    "8.7": ArchLimits(16, 1024, 4, "Jetson Orin"),
    "8.9": ArchLimits(24, 1024, 4, "L4, L40S, RTX 4090"),
    "9.0": ArchLimits(32, 1024, 4, "H100, H200"),
    "10.0": ArchLimits(32, 1024, 4, "B200"),
    "12.0": ArchLimits(32, 1024, 4, "RTX 5090, RTX PRO 6000 Blackwell"),
}
SCHEDULERS_DEFAULT = 4  # every compute capability from 7.0 on has 4; an unknown one is assumed alike


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v >= 0 else None


def device_limits(props: dict[str, Any] | None) -> dict[str, Any] | None:
    """The SM's limits from deviceProperties (NVIDIA field names as kineto writes them), or None when the
    trace lacks what the rules need (AMD traces carry no registers per SM: regsPerMultiprocessor)."""
    if not isinstance(props, dict):
        return None
    regs = _int(props.get("regsPerMultiprocessor"))
    smem = _int(props.get("sharedMemPerMultiprocessor"))
    threads = _int(props.get("maxThreadsPerMultiprocessor"))
    warp = _int(props.get("warpSize"))
    major, minor = _int(props.get("computeMajor")), _int(props.get("computeMinor"))
    if not (regs and smem and threads and warp) or major is None:
        return None
    cc = f"{major}.{minor or 0}"
    arch = ARCH_LIMITS.get(cc)
    return {"regs_per_sm": regs, "smem_per_sm": smem, "max_warps": threads // warp, "warp_size": warp,
            "max_blocks": _int(props.get("maxBlocksPerMultiProcessor")) or (arch.max_blocks_per_sm if arch else None),
            "reserved_smem": arch.reserved_smem_per_block if arch else (1024 if major >= 8 else 0),
            "regs_per_block": _int(props.get("regsPerBlock")), "compute_capability": cc,
            "max_threads_per_block": _int(props.get("maxThreadsPerBlock")),
            "schedulers": arch.schedulers if arch else SCHEDULERS_DEFAULT,
            "smem_per_block_default": _int(props.get("sharedMemPerBlock")), "sms": _int(props.get("numSms"))}


def theoretical(regs_per_thread: int, smem_bytes: int, threads_per_block: int,
                dev: dict[str, Any]) -> dict[str, Any] | None:
    """Blocks and warps per SM, occupancy % and the binding limit(s); None when the launch cannot be judged."""
    warp = dev["warp_size"]
    if threads_per_block <= 0 or regs_per_thread < 0 or smem_bytes < 0:
        return None
    # A launch no SM could hold is not a launch that ran: the trace's values are wrong, not the occupancy 0.
    if (regs_per_thread > MAX_REGS_PER_THREAD or threads_per_block > dev["max_warps"] * warp
            or (dev.get("max_threads_per_block") and threads_per_block > dev["max_threads_per_block"])
            or smem_bytes + dev["reserved_smem"] > dev["smem_per_sm"]):
        return None
    warps_per_block = -(-threads_per_block // warp)
    limits: dict[str, int] = {"warps": dev["max_warps"] // warps_per_block}
    if regs_per_thread > 0:
        # registers go to warps inside one scheduler's quarter of the file: warps per scheduler first
        regs_per_warp = -(-regs_per_thread * warp // REG_UNIT) * REG_UNIT
        sched = dev.get("schedulers") or SCHEDULERS_DEFAULT
        limits["registers"] = ((dev["regs_per_sm"] // sched) // regs_per_warp) * sched // warps_per_block
    if smem_bytes > 0:
        per_block = -(-smem_bytes // SMEM_UNIT) * SMEM_UNIT + dev["reserved_smem"]
        limits["shared memory"] = dev["smem_per_sm"] // per_block
    if dev.get("max_blocks"):
        limits["blocks"] = dev["max_blocks"]
    blocks = min(limits.values())
    warps = blocks * warps_per_block
    return {"blocks_per_sm": blocks, "warps_per_sm": warps, "max_warps_per_sm": dev["max_warps"],
            "theoretical_pct": round(100.0 * warps / dev["max_warps"], 2),
            "limited_by": [k for k, v in limits.items() if v == blocks],
            "block_limit_known": bool(dev.get("max_blocks"))}


def zero_estimate_cause(smem_bytes: int, grid_blocks: float, threads_per_block: int,
                        dev: dict[str, Any] | None) -> str | None:
    """Why kineto's ``est. achieved occupancy %`` reads 0 for this launch (see the module's docstring):
    "shared memory over the default limit", "idle SMs" (a grid too small to register), or None when
    the device's limits are not known or neither holds."""
    if dev is None:
        return None
    limit = dev.get("smem_per_block_default")
    if limit and smem_bytes > limit:
        return "shared memory over the default limit"
    sms = dev.get("sms")
    if sms and grid_blocks == grid_blocks and 0 < grid_blocks and threads_per_block > 0:
        max_threads = dev["max_warps"] * dev["warp_size"]
        if 100.0 * (grid_blocks / sms) * threads_per_block / max_threads < 0.5:
            return "idle SMs"
    return None
