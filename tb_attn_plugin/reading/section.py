"""The report's reading sections: ``reading`` (each layer type × implementation read the way the post reads
one attention call: expected against actual kernels, the cost on the host; docs/api.md) and ``kernel_reading``
(attention's kernels read closely: fingerprints, once per name; each layer's occupancy as it really is, beside
CUPTI's estimate; for SDPA calls, why not flash)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Any

import msgspec
import numpy as np

from ..attention import patterns as P
from ..attention.detect import Call
from ..format.report.layers import KernelOccupancy, WhyNotFlash
from ..table import columns
from ..trace.link import Linked
from . import expected, fingerprint, host_cost, occupancy, why_not_flash

KERNEL_CATS = frozenset({"kernel", "Kernel"})
LOW_PCT = 25.0  # theoretical occupancy below a quarter of the SM's warps is called low
LOW_BY_DESIGN = "low by design: registers/shared memory keep the tiles on chip"
MAX_GROUPS = 200  # layer type × implementation pairs; a trace without module scopes can name many
MAX_EVIDENCE = 8  # correlation ids kept per claim
KINETO_ESTIMATE = ("pytorch/kineto libkineto/src/DeviceProperties.cpp kernelOccupancy: cuda_occupancy.h with "
                   "shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT, maxDynamicSharedSizeBytes = 0, blocks capped at "
                   "grid / numSms")


def build(L: Linked, calls: list[Call], call_of: list[int], stage_of: list, ev, has_gpu: bool,
          phase_of: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """One row per (layer type, implementation), most calls first; ``ev``: the trace's events (its
    launches' columns); ``phase_of``: each call's serving phase (overview/phases.py), which splits
    every row by phase where the trace's calls have more than one."""
    readings = expected.read_calls(L, calls, call_of, stage_of, has_gpu)
    exp = expected.group(calls, readings)
    # calls whose forward left no kernel in the trace (a cut GPU window, a backward-only call) are no zeros
    no_forward = {c.id for c in calls if has_gpu and expected.no_forward(readings[c.id])}
    # no kernel, no launch, no device properties: a CPU trace (roofline/devices.describe's "CPU only")
    cpu_only = not has_gpu and len(ev.launch_table) == 0 and not ev.device_properties
    costs = host_cost.host_costs(L, calls, ev, has_gpu)
    host = host_cost.group(calls, costs, no_forward, cpu_only)
    counts = Counter((c.layer_type, c.implementation) for c in calls)
    rows = []
    for (lt, im), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        rows.append({"layer_type": lt, "implementation": im, "calls": n,
                     "expected": exp.get((lt, im)), "host": host.get((lt, im))})
    rows = rows[:MAX_GROUPS]
    # one average over prefill and decode hides both (a decode's split-KV combine, a prefill's longer
    # kernels): the same reading again over each phase's calls, only where the trace has two or more
    if phase_of and len(set(phase_of.values())) > 1:
        _by_phase(rows, calls, readings, costs, no_forward, cpu_only, phase_of)
    return rows


PHASE_ORDER = ("prefill", "decode", "mixed", "unknown")  # overview/phases.py PHASES


def _by_phase(rows, calls, readings, costs, no_forward, cpu_only, phase_of: dict[int, str]) -> None:
    """Each row's ``phases``: its reading (expected, host) over the calls of each phase it has."""
    by: dict[str, list[Call]] = {}
    for c in calls:
        by.setdefault(phase_of.get(c.id, "unknown"), []).append(c)
    for row in rows:
        row["phases"] = []
    at = {(row["layer_type"], row["implementation"]): row for row in rows}
    for ph in PHASE_ORDER:
        cs = by.get(ph)
        if not cs:
            continue
        exp = expected.group(cs, readings)
        host = host_cost.group(cs, costs, no_forward, cpu_only)
        counts = Counter((c.layer_type, c.implementation) for c in cs)
        for key, n in counts.items():
            row = at.get(key)
            if row is not None:
                row["phases"].append({"phase": ph, "calls": n, "expected": exp.get(key), "host": host.get(key)})


class _Launches:
    """The launches of one kernel name in one layer: configurations by GPU time, CUPTI's estimate."""

    __slots__ = ("configs", "achieved_us", "achieved_sum", "zero", "measured", "zero_corr", "zero_causes",
                 "min_grid", "small_grid", "zero_corrs")

    def __init__(self) -> None:
        self.configs: dict[tuple[int, int, int], float] = {}  # (registers, shared memory, threads) -> µs
        self.achieved_us = 0.0  # GPU time of the launches CUPTI estimated (> 0)
        self.achieved_sum = 0.0  # their estimate x time
        self.zero = 0  # launches the trace's estimate reads 0 for
        self.measured = 0
        self.zero_corr: int | None = None
        self.zero_causes: Counter = Counter()  # occupancy.zero_estimate_cause of each 0 launch (None: neither)
        self.zero_corrs: list[int] = []  # correlation ids of the first 0 launches: the claim's evidence
        self.min_grid: float | None = None  # the smallest grid launched, in blocks
        self.small_grid = 0  # launches whose grid has fewer blocks than the device has SMs


def kernel_reading(report: dict[str, Any], ev, L, calls, call_of: list[int], m) -> dict[str, Any]:
    """The report's ``kernel_reading`` (each distinct kernel name's fingerprint, once, and what occupancy
    could be read); adds ``occupancy`` and ``why_not_flash`` to every layer row, and a one-line
    ``fingerprint`` to every row of the report's kernel list."""
    device = report.get("device")
    arch = fingerprint.device_arch(device)
    props = ev.device_properties[0] if ev.device_properties and isinstance(ev.device_properties[0], dict) else None
    dev = occupancy.device_limits(props)
    stages: dict[str, str | None] = {}
    for row in report.get("kernels") or []:
        row["fingerprint"] = fingerprint.summary(fingerprint.decode(row["name"]))
        stages.setdefault(row["name"], row.get("stage"))
    rows = {lay.layer: lay for lay in report["layers"]}
    for lay in rows.values():
        for k in lay.kernels:
            stages.setdefault(k.name, k.stage)
    launches = _launches(L, calls, call_of, m, rows, dev)
    apis = _launch_apis(ev, {acc.zero_corr for acc in launches.values() if acc.zero_corr is not None})
    amd = bool(device) and device.get("vendor") == "AMD"
    recorded = False
    for name, lay in rows.items():
        occ = []
        for k in lay.kernels:
            acc = launches.get((name, k.name))
            if acc is not None and (acc.configs or acc.measured):  # nothing recorded: said once, below
                recorded = True
                occ.append(KernelOccupancy(**_occupancy_row(k.name, acc, dev, apis)))
        lay.occupancy = occ
    section = {
        "device_arch": arch,
        "occupancy": _occupancy_note(bool(launches), recorded, dev, amd),
        "fingerprints": {n: _fingerprint(n, arch, st) for n, st in stages.items()},
    }
    _why_not_flash(report, L, calls, rows, device)
    return section


def _occupancy_note(any_kernels: bool, recorded: bool, dev, amd: bool) -> str:
    if not any_kernels:
        return "no GPU kernels in attention calls"
    if not recorded:
        return ("unknown: the trace records no registers per thread, shared memory or achieved occupancy"
                + (" (ROCm's tracer writes grid and block only, and a CDNA CU's limits are VGPRs, SGPRs and LDS per "
                   "wavefront, which the CUDA rules do not model)" if amd else ""))
    if dev is None:
        return "CUPTI's estimate only: the trace's deviceProperties lack registers or shared memory per SM"
    return ("theoretical by the CUDA occupancy rules (reading/occupancy.py) beside CUPTI's est. achieved "
            "occupancy %, per layer")


def _launches(L, calls, call_of, m, rows, dev=None) -> dict[tuple[str, str], _Launches]:
    """(layer, kernel name) -> its launches, over the kernels (not memcpy/memset: no occupancy) of the
    calls whose layer has a row. A kernel is in its op's call, else in the call holding it. Columns
    per launch (its configuration, CUPTI's estimate), then sums per group by bincount, in kernel
    order: the sums of a loop over the kernels, to the bit."""
    op = np.asarray(L.kernel_op, np.int64)
    if not len(op):
        return {}
    call = np.append(np.fromiter(call_of, np.int64, len(call_of)), -1)[op]
    call = np.where(call >= 0, call, np.asarray(m.kernel_call, np.int64))
    in_rows = np.array([c.layer in rows for c in calls] + [False], bool)  # [-1]: no call
    kernels = L.kernels
    at = [i for i in np.flatnonzero(in_rows[call]).tolist() if kernels[i].cat in KERNEL_CATS]
    if not at:
        return {}
    layers = [c.layer for c in calls]
    group, keys = columns.factorize(range(len(at)), ([layers[c] for c in call[at].tolist()],
                                                     [kernels[i].name for i in at]), "")
    out = {tuple(k): _Launches() for k in keys}  # a group even where no launch has args
    accs = list(out.values())
    cfg = L.kernel_config
    at = np.array(at, np.int64)
    with_args = np.flatnonzero(cfg.has_args[at])
    if not len(with_args):
        return out
    at, g = at[with_args], group[with_args]  # the launches whose event has args
    dur = np.asarray(L.kernel_dur, np.float64)[at]
    regs, smem, threads, occ = cfg.registers[at], cfg.shared_memory[at], cfg.threads[at], cfg.occupancy[at]
    # configurations: (group, registers, shared memory, threads) numbered in order of first launch
    ok = np.flatnonzero((regs >= 0) & (smem >= 0) & (threads > 0))
    if len(ok):
        cid, cfgs = columns.factorize(range(len(ok)), (g[ok], regs[ok], smem[ok], threads[ok]))
        for (gi, r, sm, th), us in zip(cfgs, np.bincount(cid, weights=dur[ok], minlength=len(cfgs)).tolist()):
            accs[gi].configs[(r, sm, th)] = us
    measured = ~np.isnan(occ)
    positive, zero = measured & (occ > 0), measured & (occ == 0)
    n = len(accs)
    counts = [np.bincount(g[mask], minlength=n).tolist() for mask in (measured, zero)]
    us = np.bincount(g[positive], weights=dur[positive], minlength=n).astype(np.float64).tolist()
    sums = np.bincount(g[positive], weights=occ[positive] * dur[positive], minlength=n).astype(np.float64).tolist()
    for acc, n_measured, n_zero, a_us, a_sum in zip(accs, *counts, us, sums):
        acc.measured, acc.zero, acc.achieved_us, acc.achieved_sum = n_measured, n_zero, a_us, a_sum
    grid = cfg.grid[at]
    sms = dev.get("sms") if dev else None
    has_grid = ~np.isnan(grid)
    for gi, gmin in zip(*_group_min(g[has_grid], grid[has_grid])):
        accs[gi].min_grid = gmin
    if sms:
        for gi, n_small in enumerate(np.bincount(g[has_grid & (grid < sms)], minlength=n).tolist()):
            accs[gi].small_grid = n_small
    kt = L.kernel_table
    has_corr, corr = kt.has("correlation"), kt["correlation"]
    for k in np.flatnonzero(zero).tolist():  # the few 0 launches: why each reads 0, and its id
        acc, i = accs[g[k]], at[k]
        acc.zero_causes[occupancy.zero_estimate_cause(int(smem[k]), float(grid[k]), int(threads[k]), dev)] += 1
        if has_corr[i] and len(acc.zero_corrs) < MAX_EVIDENCE:
            acc.zero_corrs.append(int(corr[i]))
            if acc.zero_corr is None:
                acc.zero_corr = int(corr[i])
    return out


def _group_min(g: np.ndarray, v: np.ndarray) -> tuple[list[int], list[float]]:
    """(groups, the least value of each) over the groups present."""
    if not len(g):
        return [], []
    order = np.lexsort((v, g))
    first = np.flatnonzero(np.r_[True, g[order][1:] != g[order][:-1]])
    return g[order][first].tolist(), v[order][first].tolist()


def _launch_apis(ev, wanted: set[int]) -> dict[int, str]:
    """Correlation id -> the runtime/driver call that launched it (a later launch wins, as in link's
    launches_by_correlation), for the few kernels that need it; the ids are read from the launches'
    columns (their records). Filtered here rather than from that dict of every launch, which cost 2%
    of OWLv2 x4's CPU (bench/paired_cli.py)."""
    if not wanted:
        return {}
    lt = ev.launch_table
    at = np.flatnonzero(lt.has("correlation"))
    return {c: ev.launch_name(j) for j, c in zip(at.tolist(), lt["correlation"][at].tolist()) if c in wanted}


def _fingerprint(name: str, arch: str | None, stage: str | None) -> dict[str, Any]:
    fp = fingerprint.decode(name)
    return {**fp, "summary": fingerprint.summary(fp), "flags": fingerprint.flags(fp, arch, stage)}


def _occupancy_row(name: str, acc: _Launches, dev, apis: dict[int, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "registers_per_thread": None, "shared_memory_bytes": None,
                           "block_threads": None, "configurations": len(acc.configs), "blocks_per_sm": None,
                           "warps_per_sm": None, "max_warps_per_sm": None, "theoretical_pct": None,
                           "limited_by": [], "achieved_pct": None, "launch_api": None, "reading": "",
                           "min_grid_blocks": None if acc.min_grid is None else int(acc.min_grid),
                           "small_grid_launches": acc.small_grid, "zero_estimates": acc.zero,
                           "zero_estimate_cause": None, "evidence_correlations": list(acc.zero_corrs)}
    theo = None
    if acc.configs:
        regs, smem, threads = max(acc.configs.items(), key=lambda kv: kv[1])[0]  # the configuration with most time
        row.update(registers_per_thread=regs, shared_memory_bytes=smem, block_threads=threads)
        if dev is not None:
            theo = occupancy.theoretical(regs, smem, threads, dev)
            if theo is not None:
                row.update(blocks_per_sm=theo["blocks_per_sm"], warps_per_sm=theo["warps_per_sm"],
                           max_warps_per_sm=theo["max_warps_per_sm"], theoretical_pct=theo["theoretical_pct"],
                           limited_by=theo["limited_by"])
    if acc.achieved_us > 0:
        row["achieved_pct"] = round(acc.achieved_sum / acc.achieved_us, 2)
    if acc.zero_corr is not None:
        row["launch_api"] = apis.get(acc.zero_corr)
    causes = [c for c in acc.zero_causes if c is not None]
    row["zero_estimate_cause"] = (None if not acc.zero else "unexplained" if None in acc.zero_causes
                                  else causes[0] if len(causes) == 1 else "mixed")
    row["reading"] = _reading(name, acc, row, theo, dev)
    return row


def _reading(name: str, acc: _Launches, row: dict[str, Any], theo, dev) -> str:
    words = []
    if not acc.configs:
        words.append("theoretical occupancy unknown: the trace records no registers per thread or shared memory")
    elif dev is None:
        words.append("theoretical occupancy unknown: the trace's deviceProperties lack registers or shared memory "
                     "per SM")
    elif theo is None:
        words.append("theoretical occupancy unknown: the recorded launch (registers, shared memory, block) does not "
                     "fit this device's limits, so the trace's values are not trusted")
    else:
        words.append(f"theoretical {theo['theoretical_pct']:g}% ({theo['warps_per_sm']} of {theo['max_warps_per_sm']} "
                     f"warps, {theo['blocks_per_sm']} block(s) per SM), limited by {' and '.join(theo['limited_by'])}"
                     + ("" if theo["block_limit_known"] else "; resident-block limit of this GPU unknown"))
        if theo["theoretical_pct"] < LOW_PCT:
            words.append(LOW_BY_DESIGN if P.fused_family(name) is not None
                         else f"below {LOW_PCT:g}%: {' and '.join(theo['limited_by'])} bind")
    if acc.small_grid and dev and dev.get("sms"):
        words.append(f"{acc.small_grid} of its launches have fewer blocks than the {dev['sms']} SMs (smallest grid "
                     f"{row['min_grid_blocks']}): those launches leave SMs idle")
    if acc.zero:
        words.append(_zero_words(acc, row, dev))
    if row["configurations"] > 1:
        words.append(f"{row['configurations']} launch configurations; the one with the most GPU time is shown")
    return "; ".join(words)


def _zero_words(acc: _Launches, row: dict[str, Any], dev) -> str:
    """What the trace's 0% estimates are, from the launches themselves: kineto computes the figure (it is
    not measured), and it reads 0 over the default 48 KiB shared memory limit or on a grid too small."""
    head = (f"{acc.zero} of {acc.measured} launches read 0% in est. achieved occupancy %, which kineto computes, "
            f"not measures ({KINETO_ESTIMATE})")
    lim = (dev or {}).get("smem_per_block_default")
    parts = []
    over = acc.zero_causes.get("shared memory over the default limit", 0)
    if over:
        parts.append(f"{over} use more shared memory per block than the default limit of {lim:,} bytes that kineto "
                     "assumes (the kernel opted in to more; the trace does not record that), so its calculator "
                     "fits 0 blocks: read the theoretical figure instead")
    idle = acc.zero_causes.get("idle SMs", 0)
    if idle:
        parts.append(f"{idle} have grids so small that most SMs are idle (blocks per SM below 1 rounds the "
                     "estimate to 0): the SMs are idle, not unmeasured")
    rest = acc.zero_causes.get(None, 0)
    if rest:
        parts.append(f"{rest} fit neither rule: unexplained"
                     + (" (the trace's deviceProperties lack sharedMemPerBlock or numSms)" if dev is None else ""))
    tail = "; ".join(parts)
    if acc.achieved_us > 0:
        tail += "; achieved is the mean of the other launches"
    return f"{head}: {tail}"


NOT_SDPA = "not read: no aten::scaled_dot_product_attention in its calls (the checks replay SDPA's choice only)"
NO_SHAPES = ("unknown: its aten::scaled_dot_product_attention recorded no input shapes "
             "(profile with record_shapes=True)")


def _why_not_flash(report, L, calls, rows, device) -> None:
    """Each layer's ``why_not_flash``, or None and ``why_not_flash_unknown`` saying why it was not read."""
    for lay in rows.values():
        lay.why_not_flash = None
        lay.why_not_flash_unknown = NOT_SDPA
    sdpa = L.where_name(lambda nm: nm == why_not_flash.SDPA_OP)
    if not sdpa:
        return
    done = set()
    for c in sorted(calls, key=lambda c: c.id):
        if c.layer in done or c.layer not in rows or c.hi <= c.lo:
            continue
        k = bisect_left(sdpa, c.lo)
        if k >= len(sdpa) or sdpa[k] >= c.hi:
            continue
        rows[c.layer].why_not_flash_unknown = NO_SHAPES  # an SDPA op ran; unread until its inputs are
        a = L.args(sdpa[k])
        if a is None:
            continue
        x, why = why_not_flash.inputs_of(a.dims, a.types, a.concrete, bool(c.bwd_nodes), device, a.strides,
                                         sdp=(c.info.get("tag") or {}).get("sdp"))
        if x is None:
            if why:
                rows[c.layer].why_not_flash_unknown = f"unknown: its {why_not_flash.SDPA_OP} recorded a shape it cannot read ({why})"
            continue
        done.add(c.layer)
        got = why_not_flash.judge(x, cpu=report.get("time_basis") == "cpu")
        got["ran"] = rows[c.layer].implementation
        rows[c.layer].why_not_flash = msgspec.convert(got, WhyNotFlash)
        rows[c.layer].why_not_flash_unknown = None
