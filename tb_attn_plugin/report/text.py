"""Plain-text rendering of a report for the terminal: what a person reads before opening TensorBoard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..format.tags import STAGES
from ..memory import text as memory_text
from ..roofline.text import decomposition_lines, roofline_lines
from . import kernel_reading_text
from .words import cut, duration, plural

NAME_WIDTH = 48  # layer and run names in tables; longer ones end in an ellipsis


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def render(r: dict[str, Any], top: int = 8) -> str:
    basis = r["time_basis"]
    key = "gpu_us" if basis == "gpu" else "cpu_us"
    src = r["source"]
    dev = r.get("device") or {}
    out = [f"{src['path']}"]
    what = dev.get("name") or ("unknown GPU" if basis == "gpu" else "CPU only")
    meta = r.get("metadata") or {}
    if meta.get("variant"):
        what += f" · variant {meta['variant']}"
    out.append(f"  device: {what} · {plural(len(r['steps']), 'profiler step')} · {plural(r['trace']['events'], 'event')}")
    for w in r.get("warnings", []):
        out.append(f"  warning: {w}")
    total = r["total_gpu_us"] if basis == "gpu" else r["total_cpu_us"]
    att = r["attention_gpu_us"] if basis == "gpu" else r["attention_cpu_us"]
    out.append(f"  attention: {plural(r['calls'], 'call')}, {duration(att)} of {duration(total)} {basis.upper()} time "
               f"({r['attention_share']:.1%})")
    verdicts = r.get("verdicts") or []
    if verdicts:
        out.append(f"  verdict: {verdicts[0]['message']}")
    out.extend(_unknown_kernels(r))
    if not r["layers"]:
        return "\n".join(out + memory_text.render(r.get("memory")))

    by_stage: dict[str, dict[str, float]] = defaultdict(lambda: {"fwd": 0.0, "bwd": 0.0})
    kernels: dict[str, int] = defaultdict(int)
    for s in r["stages"]:
        by_stage[s["stage"]][s["pass"]] += s[key]
        kernels[s["stage"]] += s["kernels"]
    counted = "kernels"
    if basis == "cpu" and not any(kernels.values()):  # no GPU kernels: count the CPU ops that ran instead
        counted = "ops"
        for o in r.get("ops") or []:
            kernels[o["stage"]] += o["count"]
    rows = []
    for st in STAGES:
        if st in by_stage:
            f, b = by_stage[st]["fwd"], by_stage[st]["bwd"]
            rows.append([st, duration(f), duration(b) if b else "-", f"{(f + b) / att:.1%}" if att else "-", str(kernels[st])])
    out.append("")
    out.extend("  " + line for line in _table(rows, ["stage", f"fwd {basis}", f"bwd {basis}", "share", counted]))

    out.append("")
    rows = [[cut(lay["layer"], NAME_WIDTH), lay["implementation"], str(lay["calls"]), duration(lay[key]),
             f"{lay['tflops']:.3g}" if lay.get("tflops") else "-"] for lay in r["layers"][:top]]
    out.extend("  " + line for line in _table(rows, ["top layers", "implementation", "calls", basis, "TFLOP/s"]))
    if len(r["layers"]) > top:
        out.append(f"  … {plural(len(r['layers']) - top, 'more layer')}")

    out.append("")
    rows = [[cut(i["layer_type"], NAME_WIDTH), i["implementation"], str(i["calls"])] for i in r["implementations"]]
    out.extend("  " + line for line in _table(rows, ["layer type", "implementation", "calls"]))
    out.extend(kernel_reading_text.lines(r))
    if len(verdicts) > 1:
        out.append("")
        out.extend(f"  - {v['message']}" for v in verdicts[1:])
    said = {f"  - {v['message']}" for v in verdicts}  # the roofline verdict is its first layer's line
    roof = [line for line in roofline_lines(r) if line not in said]
    if roof:
        out.append("")
        out.extend(roof)
    out.append("")
    out.extend(memory_text.render(r.get("memory")))
    return "\n".join(out)


def _unknown_kernels(r: dict[str, Any], top: int = 5) -> list[str]:
    """The safety net (attention/safety.py): kernels that look like attention but nothing explains."""
    rows = r.get("unknown_kernels") or []
    if not rows:
        return []
    out = ["", "  unknown attention kernels (named like attention, in no family and no call):"]
    out.extend("  " + line for line in _table([[k["name"][:90], str(k["count"]), duration(k["gpu_us"]), f"{k['share']:.1%}"]
                                                for k in rows[:top]], ["kernel", "count", "gpu", "share"]))
    out.append("  to count one as attention, put a row like this in a file and pass --patterns FILE:")
    out.extend("    " + line for line in rows[0]["toml"].splitlines())
    return out


def render_compare(c: dict[str, Any], top: int = 12) -> str:
    """The comparison of compare.compare_reports as text: summary, stage and layer-type deltas."""
    names = [cut(n, 24, keep_end=True) for n in c["runs"]]
    out = [c["summary"], f"  ({c['time_basis_note']})", ""]

    def pct(row):
        return f"{row['delta_pct']:+.0f}%" if row.get("delta_pct") is not None else "new"

    rows = [[f"{r['stage']} {r['pass']}"] + [duration(v) for v in r["values"]] + [duration(r["delta_us"]) if r["delta_us"] >= 0
            else "-" + duration(-r["delta_us"]), pct(r)] for r in c["stages"][:top]]
    if rows:
        out.extend("  " + line for line in _table(rows, ["stage"] + list(names) + ["change", "%"]))
        out.append("")
    rows = [[cut(r["layer_type"], NAME_WIDTH)] + [f"{duration(v)} ({i or '-'})" for v, i in zip(r["values"], r["implementations"])]
            + [pct(r)] for r in c["layers"][:top]]
    if rows:
        out.extend("  " + line for line in _table(rows, ["layer type"] + list(names) + ["%"]))
    only = [(name, kernels, c.get("kernels_only_in_counts", {}).get(name, len(kernels)))
            for name, kernels in c["kernels_only_in"].items()]
    if any(n for _, _, n in only):
        out.append("")
    out.extend(f"  {plural(n, 'kernel name')} only in {name}, e.g. {cut(kernels[0]['name'], 100)}"
               for name, kernels, n in only if n)
    changed = c.get("kernel_changes") or []
    if changed:
        out.append("")
        out.extend(f"  changed kernel: {k['message']}" for k in changed[:top])
    if decomposition_lines(c):
        out.extend([""] + decomposition_lines(c))
    out.extend(memory_text.render_compare(c.get("memory")))
    return "\n".join(out)
