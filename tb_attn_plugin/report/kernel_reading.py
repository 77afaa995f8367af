"""Attention's kernels read closely: fingerprints (attention/fingerprint.py, once per name), each layer's
occupancy as it really is (attention/occupancy.py, beside CUPTI's estimate) and, for SDPA calls, why not
flash (attention/why_not_flash.py)."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import numpy as np

from ..attention import fingerprint, occupancy, why_not_flash
from ..attention import patterns as P
from ..attention.fingerprint_rules import EXTENDED_LAUNCHES

KERNEL_CATS = frozenset({"kernel", "Kernel"})
LOW_PCT = 25.0  # theoretical occupancy below a quarter of the SM's warps is called low
LOW_BY_DESIGN = "low by design: registers/shared memory keep the tiles on chip"


class _Launches:
    """The launches of one kernel name in one layer: configurations by GPU time, CUPTI's estimate."""

    __slots__ = ("configs", "achieved_us", "achieved_sum", "zero", "measured", "zero_corr")

    def __init__(self) -> None:
        self.configs: dict[tuple[int, int, int], float] = {}
        self.achieved_us = 0.0  # GPU time of the launches CUPTI estimated (> 0)
        self.achieved_sum = 0.0  # their estimate x time
        self.zero = 0  # launches CUPTI wrote 0 for
        self.measured = 0
        self.zero_corr: int | None = None

    def add(self, ev) -> None:
        a = ev.args
        if a is None:
            return
        regs, smem, threads = _count(a.registers), _count(a.shared_memory), _threads(a.block)
        if regs is not None and smem is not None and threads:
            key = (regs, smem, threads)
            self.configs[key] = self.configs.get(key, 0.0) + ev.dur
        occ = a.achieved_occupancy
        if isinstance(occ, (int, float)) and not isinstance(occ, bool) and 0 <= occ <= 100:
            self.measured += 1
            if occ > 0:
                self.achieved_us += ev.dur
                self.achieved_sum += occ * ev.dur
            else:
                self.zero += 1
                if self.zero_corr is None and isinstance(a.correlation, int):
                    self.zero_corr = a.correlation


_LIMIT = 1 << 31


def _count(v: Any) -> int | None:
    if type(v) is int:  # as the profiler writes them: the fast case, one per launch
        return v if 0 <= v < _LIMIT else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < _LIMIT else None


def _threads(block: Any) -> int | None:
    if not isinstance(block, list) or not block or len(block) > 3:
        return None
    n = 1
    for x in block:
        x = _count(x)
        if not x:
            return None
        n *= x
    return n


def add(report: dict[str, Any], ev, L, calls, call_of: list[int], m) -> None:
    """Adds ``kernel_reading`` (each distinct kernel name's fingerprint, once, and what occupancy could be
    read), ``occupancy`` and ``why_not_flash`` to every layer row, and a one-line ``fingerprint`` to every
    row of the report's kernel list."""
    device = report.get("device")
    arch = fingerprint.device_arch(device)
    props = ev.device_properties[0] if ev.device_properties and isinstance(ev.device_properties[0], dict) else None
    dev = occupancy.device_limits(props)
    stages: dict[str, str | None] = {}
    for row in report.get("kernels") or []:
        row["fingerprint"] = fingerprint.summary(fingerprint.decode(row["name"]))
        stages.setdefault(row["name"], row.get("stage"))
    rows = {lay["layer"]: lay for lay in report["layers"]}
    for lay in rows.values():
        for k in lay.get("kernels") or []:
            stages.setdefault(k["name"], k.get("stage"))
    launches = _launches(L, calls, call_of, m, rows)
    apis = _launch_apis(ev, {acc.zero_corr for acc in launches.values() if acc.zero_corr is not None})
    amd = bool(device) and device.get("vendor") == "AMD"
    recorded = False
    for name, lay in rows.items():
        occ = []
        for k in lay.get("kernels") or []:
            acc = launches.get((name, k["name"]))
            if acc is not None and (acc.configs or acc.measured):  # nothing recorded: said once, below
                recorded = True
                occ.append(_occupancy_row(k["name"], acc, dev, apis))
        lay["occupancy"] = occ
    report["kernel_reading"] = {
        "device_arch": arch,
        "occupancy": _occupancy_note(bool(launches), recorded, dev, amd),
        "fingerprints": {n: _fingerprint(n, arch, st) for n, st in stages.items()},
    }
    _why_not_flash(report, L, calls, rows, device)


def _occupancy_note(any_kernels: bool, recorded: bool, dev, amd: bool) -> str:
    if not any_kernels:
        return "no GPU kernels in attention calls"
    if not recorded:
        return ("unknown: the trace records no registers per thread, shared memory or achieved occupancy"
                + (" (ROCm's tracer writes grid and block only, and a CDNA CU's limits are VGPRs, SGPRs and LDS per "
                   "wavefront, which the CUDA rules do not model)" if amd else ""))
    if dev is None:
        return "CUPTI's estimate only: the trace's deviceProperties lack registers or shared memory per SM"
    return ("theoretical by the CUDA occupancy rules (attention/occupancy.py) beside CUPTI's est. achieved "
            "occupancy %, per layer")


def _launches(L, calls, call_of, m, rows) -> dict[tuple[str, str], _Launches]:
    out: dict[tuple[str, str], _Launches] = {}
    layer_of = [c.layer for c in calls]
    kernel_call = m.kernel_call
    for k in L.kernels:
        op = k.op
        c = call_of[op] if op >= 0 else -1
        if c < 0:
            c = kernel_call[k.i]
            if c < 0:
                continue
        layer = layer_of[c]
        if layer not in rows or k.ev.cat not in KERNEL_CATS:
            continue  # memcpy/memset have no occupancy
        key = (layer, k.ev.name)
        acc = out.get(key)
        if acc is None:
            acc = out[key] = _Launches()
        acc.add(k.ev)
    return out


def _launch_apis(ev, wanted: set[int]) -> dict[int, str]:
    """Correlation id -> the runtime/driver call that launched it (a later launch wins), for the few
    kernels that need it; the ids are read from the launches' columns (their records)."""
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
                           "limited_by": [], "achieved_pct": None, "launch_api": None, "reading": ""}
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
    if acc.measured and acc.achieved_us == 0 and acc.zero:
        api = row.get("launch_api")
        why = (f"launched by {api}, which CUPTI does not estimate" if api in EXTENDED_LAUNCHES
               else f"launched by {api}" if api else "launch API not found")
        words.append(f"CUPTI reported 0% achieved: a measurement gap ({why}), not an idle SM"
                     + (f"; theoretical {theo['theoretical_pct']:g}%" if theo else ""))
    elif acc.zero:
        words.append(f"{acc.zero} of {acc.measured} launches read 0% (not measured); achieved is the mean of the rest")
    if row["configurations"] > 1:
        words.append(f"{row['configurations']} launch configurations; the one with the most GPU time is shown")
    return "; ".join(words)


NOT_SDPA = "not read: no aten::scaled_dot_product_attention in its calls (the checks replay SDPA's choice only)"
NO_SHAPES = ("unknown: its aten::scaled_dot_product_attention recorded no input shapes "
             "(profile with record_shapes=True)")


def _why_not_flash(report, L, calls, rows, device) -> None:
    """Each layer's ``why_not_flash``, or None and ``why_not_flash_unknown`` saying why it was not read."""
    for lay in rows.values():
        lay["why_not_flash"] = None
        lay["why_not_flash_unknown"] = NOT_SDPA
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
        rows[c.layer]["why_not_flash_unknown"] = NO_SHAPES  # an SDPA op ran; unread until its inputs are
        a = L.args(sdpa[k])
        if a is None:
            continue
        x = why_not_flash.inputs_of(a.dims, a.types, a.concrete, bool(c.bwd_nodes), device, a.strides)
        if x is None:
            continue
        done.add(c.layer)
        got = why_not_flash.judge(x)
        got["ran"] = rows[c.layer].get("implementation")
        rows[c.layer]["why_not_flash"] = got
        rows[c.layer]["why_not_flash_unknown"] = None
