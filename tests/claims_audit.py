"""The claims audit's walker (issue 46): re-derives the reading's claims from a trace's raw events, with code of
its own (none of the engine's), and lists every claim of a report that the events do not bear out.

``audit(events, report)`` returns the disagreements as lines (empty: every claim checked holds). Claims checked:

    ran          per module call, the kernels its forward launched (a launch on the call's thread inside the
                 ``nn.Module: <layer type>_N`` op's window) less the kernels the reading puts outside the core:
                 the mean lies within [ran_min, ran_max], and ``ran`` (with the summary's "ran N") within too
    extras       each evidence id is a raw event (a kernel's correlation id, or a CPU op's start) of the extra's
                 names; the cause agrees with those names (CAUSE_NAMES below, the walker's own table)
    occupancy    theoretical occupancy by the CUDA calculator from the launches' own registers, shared memory and
                 block; a 0% row's evidence ids are launches that read 0 and its cause is what they show; the
                 small-grid count is the launches with fewer blocks than SMs
    fingerprints each decoded dtype, head dim, tile and arch is spelled in the kernel's own name (SPELLINGS)
    why not flash on a CPU trace: the CPU flash backend is called eligible exactly when its op ran
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
CPU_FLASH_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"

# cause -> a pattern one of the extra's names must match (ATen kernel and op names, read from PyTorch's sources:
# copy_kernel / direct_copy for copies, fill_kernel for fills, the cache write of vLLM's reshape_and_cache*)
CAUSE_NAMES = {
    "layout_copy": re.compile(r"copy|contiguous|clone", re.I),
    "hidden_copy": re.compile(r"copy|clone|contiguous", re.I),
    "dtype_cast": re.compile(r"copy|_to_copy|\bto\b|cast|convert", re.I),
    "buffer_fill": re.compile(r"fill|zero|memset", re.I),
    "kv_cache_write": re.compile(r"cache", re.I),
    "split_kv_reduce": re.compile(r"reduce|combine", re.I),
    "attention_weights": re.compile(r"sum|div|mean|fill", re.I),
    "mha_fast_path": re.compile(r"transform_bias_rescale_qkv"),
}
# a fingerprint field -> how its value is spelled in a kernel name (the walker's own reading of the families'
# naming: CUTLASS/cuBLAS `bf16`/`f16`/`f32`, ATen `c10::BFloat16`/`c10::Half`/`float`, flash `cutlass::bfloat16_t`,
# Tensile/hipBLASLt `Cijk_Alik_Bljk_BBS_...`: its data type letters, B bfloat16, H half, S single)
DTYPE_SPELLINGS = {
    "bf16": re.compile(r"bf16|bfloat16|BFloat16|BF16|_BBS_|_B_BS_"),
    "fp16": re.compile(r"(?<![bB])f16|(?<![bB])[Hh]alf|fp16|FP16|_HHS_|_H_HS_"),
    "fp32": re.compile(r"f32|float(?!16)|fp32|FP32|sgemm"),
    "fp8": re.compile(r"e4m3|E4m3|e5m2|fp8|FP8"),
}
# resident blocks and warps per SM, registers per SM, allocation units (CUDA C++ Programming Guide, compute
# capability table; CUDA's occupancy calculator): the walker's own copy
SM = {(7, 0): (32, 64), (7, 5): (16, 32), (8, 0): (32, 64), (8, 6): (16, 48), (8, 9): (24, 48), (9, 0): (32, 64),
      (10, 0): (32, 64), (12, 0): (32, 48)}


def _load(events_or_doc):
    return events_or_doc["traceEvents"] if isinstance(events_or_doc, dict) else events_or_doc


def audit(doc, report: dict) -> list[str]:
    """Every claim of ``report`` (one report of ``tb-attn report --json``) the raw trace ``doc`` does not bear out."""
    events = _load(doc)
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    out: list[str] = []
    gpu = any(e.get("cat") in GPU_CATS for e in events)
    kernels = defaultdict(list)
    for e in events:
        a = e.get("args") or {}
        if e.get("cat") in GPU_CATS and "correlation" in a:
            kernels[a["correlation"]].append(e)
    ops_at = defaultdict(set)
    for e in events:
        if e.get("cat") == "cpu_op":
            ops_at[float(e["ts"])].add(e["name"])
    out += _audit_ran(events, kernels, report) if gpu else []
    out += _audit_extras(kernels, ops_at, report, gpu)
    if props:
        out += _audit_occupancy(kernels, props, report)
    out += _audit_fingerprints(report)
    if not gpu:
        out += _audit_cpu_flash(events, report)
    return out


def _module_calls(events, layer_type: str):
    rx = re.compile(rf"^nn\.Module: {re.escape(layer_type)}_\d+$")
    return [e for e in events if e.get("ph") == "X" and rx.match(e.get("name", ""))]


def _audit_ran(events, kernels, report) -> list[str]:
    out = []
    launches = [e for e in events if e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {})]
    by_tid = defaultdict(list)
    for ln in launches:
        by_tid[ln["tid"]].append(ln)
    for g in report["reading"]:
        e = g["expected"]
        if e is None:
            continue
        where = f"{g['layer_type']} × {g['implementation']}"
        if not e["ran_min"] <= e["ran"] <= e["ran_max"]:
            out.append(f"{where}: ran {e['ran']} outside its own range {e['ran_min']}..{e['ran_max']}")
        m = re.search(r"ran (\d+)", e["summary"])
        if m and int(m.group(1)) != e["ran"]:
            out.append(f"{where}: the summary says ran {m.group(1)}, the field {e['ran']}")
        calls = _module_calls(events, g["layer_type"])
        if len(calls) != g["calls"] or e["calls_without_forward"]:
            continue  # the walker finds these calls by their module only
        per_call = []
        for c in calls:
            lo, hi = c["ts"], c["ts"] + c["dur"]
            n = sum(len(kernels.get(ln["args"]["correlation"], ())) for ln in by_tid[c["tid"]] if lo <= ln["ts"] <= hi)
            per_call.append(n)
        core = sum(per_call) / len(per_call) - e["outside"]["per_call"]
        if not e["ran_min"] - 0.01 <= core <= e["ran_max"] + 0.01:
            out.append(f"{where}: the calls launched {core:.3f} kernels each beside the outside ones, "
                       f"not within ran {e['ran_min']}..{e['ran_max']}")
    return out


def _audit_extras(kernels, ops_at, report, gpu: bool) -> list[str]:
    out = []
    for g in report["reading"]:
        e = g["expected"]
        if e is None:
            continue
        for x in e["extras"]:
            where = f"{g['layer_type']} × {g['implementation']}: {x['cause']}"
            names = set(x["names"])
            ev = x["evidence"]
            if gpu and not ev["kernel_correlations"] and x["per_call"] > 0:
                out.append(f"{where}: no kernel given as evidence")
            for c in ev["kernel_correlations"]:
                raw = {k["name"] for k in kernels.get(c, ())}
                if not raw:
                    out.append(f"{where}: correlation {c} is no kernel of the trace")
                elif len(names) < 5 and not raw & names:
                    out.append(f"{where}: correlation {c} is {sorted(raw)[0][:60]}, none of its names")
            if not gpu and not ev["op_starts_us"] and x["per_call"] > 0:
                out.append(f"{where}: no op given as evidence")
            for ts in ev["op_starts_us"]:
                if not ops_at.get(float(ts), set()) & names:
                    out.append(f"{where}: no op of its names starts at {ts}")
            rx = CAUSE_NAMES.get(x["cause"])
            if rx is not None and not any(rx.search(n) for n in names):
                out.append(f"{where}: none of its names ({sorted(names)[0][:60]}...) is a {x['cause']}")
    return out


def _theoretical(p, regs: int, smem: int, block: int) -> float:
    """CUDA's occupancy calculator: warps by threads, registers allocated per warp (256-register units) in each of
    the SM's 4 warp schedulers, shared memory (128-byte units, 1 KiB reserved per block from sm80)."""
    cc = (p["computeMajor"], p["computeMinor"])
    max_blocks, max_warps = SM[cc]
    warps = -(-block // 32)
    limits = [max_blocks, max_warps // warps]
    if regs:
        per_warp = -(-regs * 32 // 256) * 256
        limits.append((p["regsPerMultiprocessor"] // 4 // per_warp) * 4 // warps)
    if smem:
        reserved = 1024 if cc[0] >= 8 else 0
        limits.append(p["sharedMemPerMultiprocessor"] // (-(-(smem + reserved) // 128) * 128))
    return 100.0 * min(limits) * warps / max_warps


def _audit_occupancy(kernels, props, report) -> list[str]:
    out = []
    p = props[0]
    launches = defaultdict(list)
    for ks in kernels.values():
        for k in ks:
            if k.get("cat") == "kernel" and "registers per thread" in k.get("args", {}):
                launches[k["name"]].append(k["args"])
    for lay in report["layers"]:
        for o in lay["occupancy"]:
            where = f"{lay['layer']}: {o['name'][:50]}"
            raw = launches.get(o["name"])
            if not raw:
                out.append(f"{where}: no launch of this name records its registers")
                continue
            if o["configurations"] == 1 and o["theoretical_pct"] is not None and (p["computeMajor"], p["computeMinor"]) in SM:
                a = raw[0]
                want = _theoretical(p, a["registers per thread"], a["shared memory"], math.prod(a["block"]))
                if abs(want - o["theoretical_pct"]) > 0.01:
                    out.append(f"{where}: theoretical {o['theoretical_pct']}%, the calculator gives {want:.2f}%")
            for c in o["evidence_correlations"]:
                a = next((k["args"] for k in kernels.get(c, ()) if k["name"] == o["name"]), None)
                if a is None or a.get("est. achieved occupancy %") != 0:
                    out.append(f"{where}: evidence {c} is no 0% launch of this kernel")
                    continue
                over = a["shared memory"] > p["sharedMemPerBlock"]
                small = math.prod(a["grid"]) < p["numSms"]
                want = "shared memory over the default limit" if over else "idle SMs" if small else None
                if o["zero_estimate_cause"] not in (want, "mixed"):
                    out.append(f"{where}: 0% blamed on {o['zero_estimate_cause']}, launch {c} shows {want}")
            if o["zero_estimates"] and not o["evidence_correlations"]:
                out.append(f"{where}: {o['zero_estimates']} 0% launches with no evidence")
    return out


def _audit_fingerprints(report) -> list[str]:
    out = []
    for name, fp in ((report.get("kernel_reading") or {}).get("fingerprints") or {}).items():
        where = f"fingerprint of {name[:60]}"
        if fp["dtype"] in DTYPE_SPELLINGS and not DTYPE_SPELLINGS[fp["dtype"]].search(name):
            out.append(f"{where}: dtype {fp['dtype']} is not spelled in the name")
        for field in ("head_dim", "arch"):
            v = fp[field]
            if v and not re.search(rf"(?<![0-9]){re.escape(v.removeprefix('sm').removeprefix('gfx'))}(?![0-9])", name):
                out.append(f"{where}: {field} {v} is not in the name")
        if fp["tile"]:
            nums = re.findall(r"\d+", fp["tile"])
            if nums and not all(re.search(rf"(?<![0-9]){n}(?![0-9])", name) for n in nums[:2]):
                out.append(f"{where}: tile {fp['tile']} is not in the name")
    return out


def _audit_cpu_flash(events, report) -> list[str]:
    out = []
    ran = any(e.get("name") == CPU_FLASH_OP for e in events)
    for lay in report["layers"]:
        w = lay.get("why_not_flash")
        if not w:
            continue
        for b in w["backends"]:
            if b["backend"] == "flash_cpu" and (b["eligible"] is False) == ran and not lay["layer"].startswith("MultiheadAttention"):
                out.append(f"{lay['layer']}: CPU flash {'refused' if ran else 'eligible'} but its op "
                           f"{'ran' if ran else 'did not run'}")
    return out
