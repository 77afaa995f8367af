"""The overview as terminal lines: the step bar, its parts, what limits the step, host side, spread, phases."""

from __future__ import annotations

from typing import Any

from ..text.words import duration, percent, plural

BAR_WIDTH = 60
# part -> (bar letter, words)
LOOK = {
    "attention_fwd": ("A", "attention fwd"), "attention_bwd": ("B", "attention bwd"),
    "other_matmul": ("M", "other matmul"), "other_compute": ("C", "other compute"),
    "communication": ("N", "communication (exposed)"), "memcpy": ("P", "memcpy"), "memset": ("S", "memset"),
    "idle": (".", "idle"), "not_recorded": ("?", "not recorded"),
}


def bar(parts: list[dict[str, Any]], width: int = BAR_WIDTH) -> str:
    """The parts as letters in proportion (largest remainders, so the bar is always ``width`` long)."""
    total = sum(p["us"] for p in parts)
    if total <= 0:
        return ""
    exact = [p["us"] / total * width for p in parts]
    cells = [int(x) for x in exact]
    for i in sorted(range(len(parts)), key=lambda i: cells[i] - exact[i])[: width - sum(cells)]:
        cells[i] += 1
    return "".join(LOOK[p["part"]][0] * n for p, n in zip(parts, cells))


def lines(r: dict[str, Any]) -> list[str]:
    o = r.get("overview")
    if not o or not o.get("total"):
        return []
    t = o["total"]
    out = []
    if t["gpu_span_us"] is not None:
        where = t["label"] if t.get("steps", 1) == 1 else f"{plural(t['steps'], 'step')} summed"
        out.append(f"  step ({where}, GPU span {duration(t['gpu_span_us'])}, busy {duration(t['busy_us'])}):")
        out.append(f"    [{bar(t['parts'])}]")
        shown = [p for p in t["parts"] if p["us"] > 0 or p["part"] in ("idle", "not_recorded")]
        words = []
        for p in shown:
            w = f"{LOOK[p['part']][1]} {duration(p['us'])} {percent(p['share'] or 0)}"
            if p["part"] == "idle" and t.get("idle_sync_us") is not None:
                w += (f" (waiting on the host {duration(t['idle_host_us'])}, on a sync {duration(t['idle_sync_us'])}"
                      + (f", kernel wait {duration(t['idle_kernel_us'])}" if t.get("idle_kernel_us") else "") + ")")
            words.append(w)
        out.append("    " + " · ".join(words))
        if t.get("communication_us"):
            out.append(f"    communication {duration(t['communication_us'])}: {duration(t['communication_exposed_us'])} "
                       f"exposed, {duration(t['communication_hidden_us'])} hidden under compute")
        if t.get("memcpy_by_direction"):
            out.append(f"    memcpy {duration(t['memcpy_us'])} (its own union; the bar shows what no kernel covers): " + ", ".join(f"{d['direction']} {duration(d['us'])} ×{d['count']}"
                                                 for d in t["memcpy_by_direction"]))
    else:
        where = t["label"] if t.get("steps", 1) == 1 else f"{plural(t['steps'], 'step')}"
        out.append(f"  step ({where}): no GPU activity recorded, so its GPU split is unknown")
    if o.get("window_cut"):
        out.append("    the GPU window was cut: the gaps of steps that lost kernels are 'not recorded', not idle")
    host = [f"{w} {duration(t[k])}" for k, w in (("data_loading_us", "data loading"), ("optimizer_us", "optimizer"))
            if t.get(k)]
    if t.get("host_us") is not None:
        out.append(f"    host: step {duration(t['host_us'])}" + (", " + ", ".join(host) if host else ""))
    spread = {s["figure"]: s for s in o.get("spread") or []}
    if len(o["steps"]) > 1:
        figs = [f"{k.replace('_us', '').replace('_', ' ')} {duration(s['min_us'])} / {duration(s['median_us'])} / "
                f"{duration(s['max_us'])}" for k, s in spread.items() if k in ("gpu_span_us", "idle_us", "busy_us")]
        if figs:
            out.append(f"    per step (min / median / max over {len(o['steps'])}): " + "; ".join(figs))
    out.append(f"  limit: {o['limit']['sentence']}")
    known = [p for p in o.get("phases") or [] if p["phase"] != "unknown"]
    if known:
        out.append("  serving phases: " + ", ".join(f"{p['phase']} {plural(p['calls'], 'call')} {duration(p['gpu_us'])}"
                                                    for p in o["phases"]))
        for p in known:
            out.extend(_phase_lines(p))
        if any(p.get("roofline") for p in known):
            out.append(f"    ({o.get('phase_convention', '')})")
    return out


def _phase_lines(p: dict[str, Any]) -> list[str]:
    """One phase's stages and roofline point."""
    out = []
    key = "gpu_us" if p["gpu_us"] > 0 else "cpu_us"  # the time basis: GPU where the calls ran kernels
    stages = [f"{s['stage']} {s['pass']} {duration(s[key])}" for s in p.get("stages") or [] if s[key] > 0][:4]
    if stages:
        out.append(f"    {p['phase']}: " + ", ".join(stages))
    rp = p.get("roofline")
    if "roofline" in p and not rp:
        out.append("      roofline: unknown (no call of this phase recorded its query and key shapes; a paged cache's "
                   "lengths are tensor values the profiler does not keep)")
    if rp:
        what = {"kv_cache_read": "KV cache read", "kv_cache_read_at_most": "KV cache read at most"}.get(
            rp["bytes_are"], "bytes")
        rate = f", {rp['achieved_tbs']:.3g} TB/s" if rp.get("achieved_tbs") is not None else ""
        inten = f"{rp['intensity']:.3g} FLOP/B" if rp.get("intensity") is not None else "intensity unknown"
        out.append(f"      roofline ({plural(rp['calls'], 'call')} with shapes): {what} {rp['bytes'] / 1e6:.4g} MB, "
                   f"{inten}{rate}: {rp['bound'] or 'bound unknown'}-bound ({rp['bound_reason']})"
                   .replace("None-bound", "bound unknown"))
    return out
