"""The memory lines of ``tb-attn report`` and ``tb-attn compare``."""

from __future__ import annotations

from typing import Any

from ..text.units import duration_text
from .engine import NO_MEMORY
from .section import UNKNOWN, gib

TOP_LAYERS = 6
TOP_STAGES = 8


def _attribution(a: dict[str, Any] | None) -> list[str]:
    """How attention's allocations were found (snapshots only)."""
    if not a:
        return []
    if a["by"] == "unknown":
        return [f"  memory: {a.get('reason') or UNKNOWN}"]
    if a["by"] == "annotations":
        return ["  memory: attention found by the collector's annotations"]
    line = f"  memory: attention found by its stack frames ({len(a.get('sites', []))} sites"
    devs = a.get("devices_with_attention") or []
    if devs:
        line += f"; attention ran on {', '.join(devs)}"
    line += ")"
    if a.get("structure_sites"):
        line += (f"; {len(a['structure_sites'])} found by what they allocate (QK^T, a softmax of its size, AV), "
                 "no name saying attention")
    if a.get("gqa_layers"):
        line += f"; MQA/GQA (K/V with fewer heads than Q) in {', '.join(a['gqa_layers'])}"
    out = [line]
    if a.get("unattributed_bwd_allocs"):
        out.append(f"  memory: {a['unattributed_bwd_allocs']} backward allocations "
                   f"({gib(a['unattributed_bwd_bytes'])}) unattributed: their autograd node's forward op "
                   "also ran outside attention, or its forward is not in the record")
    if a.get("allocs_without_frames"):
        out.append(f"  memory: {a['allocs_without_frames']} allocations ({gib(a['bytes_without_frames'])}) have no "
                   "frames (backward on the autograd thread records none without stacks=\"all\"): not attributed")
    return out


def render(mem: dict[str, Any] | None) -> list[str]:
    """Lines (indented) for a report's memory section; one line saying how to record it when absent."""
    if mem is None:
        return [f"  memory: {NO_MEMORY}"]
    out = [f"  memory ({mem['source']}, {mem['device']}, {mem['events']} allocation events): "
           f"{mem['peak']['explanation'] if mem.get('peak') else 'no allocations'}"]
    p = mem.get("peak")
    if p:
        extra = []
        if p.get("reserved_minus_allocated") is not None:
            extra.append(f"reserved minus allocated at the peak {gib(p['reserved_minus_allocated'])}")
        if p.get("before_record_bytes"):
            extra.append(f"{gib(p['before_record_bytes'])} live from before the record")
        share = p["attention_share"]
        out.append(f"  memory: attention's share of the peak {share:.0%}" if share is not None else f"  memory: {UNKNOWN}")
        if extra:
            out[-1] += f"; {'; '.join(extra)}"
    ap = mem.get("attention_peak")
    if ap:
        share = f" ({ap['share']:.0%} of the {gib(ap['live_bytes'])} live then)" if ap.get("share") is not None else ""
        out.append(f"  memory: attention's own peak {gib(ap['bytes'])} at {duration_text(ap['t_us'])}{share}")
    sm = mem["score_matrix"]
    if sm["blocks"]:
        per = [lay for lay in mem["layers"] if lay["score_matrix_blocks"]]
        out.append(f"  memory: score-matrix blocks: {sm['blocks']} ({gib(sm['bytes_total'])} in total, "
                   f"up to {gib(sm['bytes_per_call_max'])} per call; block = B·H·Lq·Lk·itemsize = "
                   f"{gib(per[0]['score_bytes']) if per and per[0]['score_bytes'] else '?'})")
    else:
        out.append("  memory: no score-matrix blocks (no allocation of B·H·Lq·Lk·itemsize bytes in any call)")
    ch = mem["churn"]
    churn = f"{ch['allocs']} allocs, {ch['frees']} frees, {gib(ch['bytes_allocated'])} allocated"
    if "segment_allocs" in ch:
        churn += (f"; segments: {ch['segment_allocs']} allocs, {ch['segment_frees']} frees, "
                  f"{ch['segment_maps']} maps, {ch['segment_unmaps']} unmaps, {ch['flush_retries']} cache flushes")
    if ch.get("ooms"):
        where = ", ".join(f"{o['layer'] or 'outside attention'}" for o in ch["ooms"][:3])
        churn += f"; {len(ch['ooms'])} OOMs ({where})"
    out.append(f"  memory churn: {churn}")
    out.extend(_attribution(mem.get("attribution")))
    rows = [lay for lay in mem["layers"] if lay["allocs"]][:TOP_LAYERS]
    if rows:
        out.append("")
        w = max(len(r["layer"]) for r in rows + [{"layer": "layer"}])
        out.append(f"  {'layer'.ljust(w)}  {'peak growth':>11}  {'allocated':>10}  {'allocs':>6}  {'score blocks':>12}")
        for r in rows:
            out.append(f"  {r['layer'].ljust(w)}  {gib(r['peak_growth_bytes']):>11}  {gib(r['bytes_allocated']):>10}  "
                       f"{r['allocs']:>6}  {r['score_matrix_blocks']:>12}")
            stages = ", ".join(f"{st['stage']}{' (bwd)' if st['pass'] == 'bwd' else ''} {gib(st['bytes_allocated'])}"
                               for st in r.get("stages", [])[:TOP_STAGES])
            if stages:
                out.append(f"  {''.ljust(w)}    by stage: {stages}")
    if mem.get("snapshot_section"):
        out.append("  memory snapshot:")
        out.extend("  " + line for line in render(mem["snapshot_section"]))
    return out


def lines(r: dict[str, Any]) -> list[str]:
    """The memory section of a report, as text."""
    return render(r.get("memory"))


def render_snapshot_report(r: dict[str, Any]) -> str:
    return "\n".join([r["source"]["path"]] + render(r["memory"]))


def render_compare(mc: dict[str, Any] | None) -> list[str]:
    if not mc:
        return []
    out = ["", f"  memory: {mc['summary']}"]
    for row in mc["layers"][:8]:
        vals = " -> ".join(gib(v) if v is not None else "-" for v in row["peak_growth_bytes"])
        out.append(f"  memory {row['layer']}: peak growth {vals}; score blocks "
                   f"{' -> '.join(str(v) if v is not None else '-' for v in row['score_matrix_blocks'])}")
    return out
