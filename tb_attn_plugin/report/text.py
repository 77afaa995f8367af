"""Plain-text rendering of a report for the terminal: what a person reads before opening TensorBoard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..format.report.layers import Layer
from ..format.tags import STAGES
from ..text.units import flops_rate_text
from ..memory import text as memory_text
from ..overview import text as overview_text
from ..reading import call as call_reading
from ..reading import text as kernel_reading_text
from ..roofline.text import decomposition_lines, roofline_lines
from ..text.words import cut, duration, plural

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
    out.extend(overview_text.lines(r))  # the step first: the attention figures below are read in its light
    total = r["total_gpu_us"] if basis == "gpu" else r["total_cpu_us"]
    att = r["attention_gpu_us"] if basis == "gpu" else r["attention_cpu_us"]
    win = r.get("gpu_window") or {}
    if basis == "gpu" and win.get("calls"):  # some calls lost kernels: what was recorded is a lower bound
        out.append(f"  attention: {plural(r['calls'], 'call')}, at least {duration(att)} of {duration(total)} recorded "
                   f"GPU time ({r['attention_share']:.1%} of what was recorded; "
                   f"{win['calls_not_recorded'] + win['calls_partly_recorded']} calls lost kernels: GPU window cut)")
    elif total > 0:
        out.append(f"  attention: {plural(r['calls'], 'call')}, {duration(att)} of {duration(total)} {basis.upper()} time "
                   f"({r['attention_share']:.1%})")
    else:  # nothing recorded: a share of nothing is unknown, not 0%
        out.append(f"  attention: {plural(r['calls'], 'call')}; share unknown: the trace recorded no {basis.upper()} time")
    found = _found_by(r)
    if found:
        out.append(f"  found: {found}")
    verdicts = r.get("verdicts") or []
    if verdicts:
        out.append(f"  verdict: {verdicts[0]['message']}")
    out.extend(_unknown_kernels(r))
    out.extend(_unjoined_kernels(r))
    out.extend(_accounting(r))
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
    # A stage whose ops ran but launched no recorded kernel: nothing ran on the GPU ("-"), or, in a
    # cut window, its kernels may be among those not recorded: never "0.0 µs".
    none_ran = "not recorded" if win.get("calls") else "-"
    for st in STAGES:
        if st in by_stage:
            f, b = by_stage[st]["fwd"], by_stage[st]["bwd"]
            if basis == "gpu" and not kernels[st] and not f and not b:
                rows.append([st, none_ran, "-", "-", "0"])
                continue
            rows.append([st, duration(f), duration(b) if b else "-", f"{(f + b) / att:.1%}" if att else "-", str(kernels[st])])
    out.append("")
    out.extend("  " + line for line in _table(rows, ["stage", f"fwd {basis}", f"bwd {basis}", "share", counted]))

    out.append("")
    rows = [[cut(lay.layer, NAME_WIDTH), lay.implementation, str(lay.calls), _layer_time(lay, key),
             flops_rate_text(lay.tflops) if lay.tflops else "-"] for lay in r["layers"][:top]]
    out.extend("  " + line for line in _table(rows, ["top layers", "implementation", "calls", f"{basis} (whole call)", "FLOP rate (core)"]))
    if len(r["layers"]) > top:
        out.append(f"  … {plural(len(r['layers']) - top, 'more layer')}")

    out.append("")
    rows = [[cut(i["layer_type"], NAME_WIDTH), i["implementation"], str(i["calls"])] for i in r["implementations"]]
    out.extend("  " + line for line in _table(rows, ["layer type", "implementation", "calls"]))
    out.extend(reading_lines(r))
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


def _layer_time(lay: Layer, key: str) -> str:
    """A layer's time; "not recorded" or "≥ t" on the GPU when some of its calls lost kernels (gpu_window)."""
    lost = lay.gpu_unrecorded_calls if key == "gpu_us" else None
    t = getattr(lay, key)
    if not lost:
        return duration(t)
    return "not recorded" if not t else f"≥ {duration(t)}"


def reading_lines(r: dict[str, Any], top: int = 8) -> list[str]:
    """The reading per layer type × implementation: expected vs ran with each extra's cost and fix, host vs GPU."""
    rows = r.get("reading") or []
    if not rows:
        return []
    out = ["", "  reading each call (expected against actual, per forward; the cost on the host):"]
    for g in rows[:top]:
        out.append(f"  {cut(g['layer_type'], NAME_WIDTH)} · {g['implementation']} · {plural(g['calls'], 'call')}")
        e = g.get("expected")
        if e:
            out.append(f"    {e['summary']}")
            for x in e["extras"]:
                per_step = f", {duration(x['us_per_step'])} per step" if x.get("us_per_step") is not None else ""
                out.append(f"      +{x['per_call']:g} {x['what']}; {duration(x['us_per_call'])} per call{per_step}"
                           + (f"; fix: {x['fix']}" if x["fix"] else ""))
            for f in e["flags"]:
                out.append(f"      {f['what']}: {cut(f['names'][0], 60) if f['names'] else ''}; fix: {f['fix']}")
            if e.get("transposes") is not None and e.get("transposes_expected") is not None:
                out.append(f"      aten::transpose ×{e['transposes']} inside the op: metadata only, no kernel "
                           f"(the post counts {e['transposes_expected']} for this backend)")
        h = g.get("host")
        if h:
            out.append(f"    host: {_host_line(h)}" + (f"; fix: {h['fix']}" if h.get("fix") else ""))
            if not h["graph_replay"]:
                out.append(f"      host time: {_host_parts(h)}")
        else:
            out.append(f"    host: unknown: {call_reading.NO_HOST}")
        out.extend(_phase_reading_lines(g.get("phases") or []))
    if len(rows) > top:
        out.append(f"  … {plural(len(rows) - top, 'more layer type')}")
    out.append(f"  backward: {call_reading.BACKWARD}")
    return out


def _phase_reading_lines(phases: list[dict[str, Any]]) -> list[str]:
    """The reading over each serving phase's calls (a report whose calls have two phases or more)."""
    out = []
    for p in phases:
        e, h = p.get("expected"), p.get("host")
        out.append(f"    {p['phase']} · {plural(p['calls'], 'call')}: " + (e["summary"] if e else "no forward read"))
        if e:
            out.extend(f"      +{x['per_call']:g} {x['cause'].replace('_', ' ')}: {duration(x['us_per_call'])} per call"
                       for x in e["extras"])
        if h:
            out.append(f"      host: {_host_line(h)}")
    return out


def _host_line(h: dict[str, Any]) -> str:
    if h["graph_replay"] or h["gpu_us_per_call"] is None:
        return h["summary"]
    verdict = "host-bound: the GPU waits for the CPU" if h["host_bound"] else "GPU-bound"
    via = ", ".join(f"{a['name']} ×{a['per_call']:g}" for a in h["launch_apis"][:3]) or "no launch recorded"
    queries = f", {h['occupancy_queries_per_call']:g} occupancy queries" if h["occupancy_queries_per_call"] else ""
    return (f"{duration(h['host_us_per_call'])} per call on the host vs {duration(h['gpu_us_per_call'])} on the GPU "
            f"({verdict}); launches: {via}{queries}")


def _host_parts(h: dict[str, Any]) -> str:
    """Where the host time went: the attention op's own work (library, plan selection), dispatch, launches."""
    scope = f" (inside {h['scope']})" if h.get("scope") else ""
    if h.get("cpu_only"):  # no GPU: nothing launched, and the other ops' self time is their computation
        own = f"{duration(h['dispatch_us_per_call'])} in the ops' own CPU work (no GPU in this trace)"
        if not h.get("scope"):
            return own
        return f"{duration(h['attention_op_self_us_per_call'])} attention op self{scope}, {own.replace('the ops', 'the other ops')}"
    return (f"{duration(h['attention_op_self_us_per_call'])} attention op self{scope}, "
            f"{duration(h['dispatch_us_per_call'])} dispatch, {duration(h['launch_us_per_call'])} in launches, "
            f"{h['syncs_per_call']:g} syncs per call")


# How each call was found (Layer.source), most trusted first: what the text says of it.
FOUND_BY = (("tag", "collector tags"), ("op", "attention ops"), ("module", "module scopes"),
            ("motif", "the score path (QKᵀ → softmax → AV by shapes; names only as evidence)"),
            ("kernel", "kernel names or the kernel sequence"))


def _found_by(r) -> str:
    n: dict[str, int] = defaultdict(int)
    for lay in r.get("layers") or []:
        n[lay.source] += lay.calls
    return ", ".join(f"{n[k]} by {what}" for k, what in FOUND_BY if n.get(k))


def _unknown_kernels(r: dict[str, Any], top: int = 5) -> list[str]:
    """The safety net (attention/safety.py): kernels whose names look like attention but that nothing explains."""
    rows = r.get("unknown_kernels") or []
    if not rows:
        return []
    out = ["", "  unknown attention kernels (named like attention, in no family and no call):"]
    out.extend("  " + line for line in _table([[k["name"][:90], str(k["count"]), duration(k["gpu_us"]), f"{k['share']:.1%}"]
                                                for k in rows[:top]], ["kernel", "count", "gpu", "share"]))
    first = rows[0]
    if first.get("toml"):
        out.append("  to count one as attention, put a row like this in a file and pass --patterns FILE:")
        out.extend("    " + line for line in first["toml"].splitlines())
    if first.get("pattern_why"):
        out.append(f"  (pattern: {first['pattern_why']})")
    return out


def _unjoined_kernels(r: dict[str, Any], top: int = 5) -> list[str]:
    """Known attention sub-stage kernels that joined no call (attention/safety.py)."""
    rows = r.get("unjoined_kernels") or []
    if not rows:
        return []
    out = ["", "  attention sub-stage kernels in no call (not in attention time):"]
    out.extend("  " + line for line in _table([[k["name"][:90], f"{k['stage']} {k['pass']}", str(k["count"]),
                                                 duration(k["gpu_us"]), f"{k['share']:.1%}"] for k in rows[:top]],
                                               ["kernel", "stage", "count", "gpu", "share"]))
    return out


def _accounting(r: dict[str, Any]) -> list[str]:
    """'GPU time 64.14 ms = 13.30 ms attention calls + 50.84 ms not attention [+ sub-stages in no call
    + unknown]: accounted for 100.0%' (report.gpu_accounting; parts of zero left out)."""
    a = r.get("gpu_accounting")
    if not a or not a.get("total_us"):
        return []
    parts = [f"{duration(a['attention_calls_us'])} attention calls", f"{duration(a['not_attention_us'])} not attention"]
    if a.get("unjoined_helpers_us"):
        parts.append(f"{duration(a['unjoined_helpers_us'])} attention sub-stages in no call")
    if a.get("unknown_us"):
        parts.append(f"{duration(a['unknown_us'])} unknown (named like attention)")
    share = a.get("accounted_share")
    win = r.get("gpu_window") or {}
    lost = (f"; {plural(win['unrecorded_launches'], 'kernel launch', 'kernel launches')} not recorded "
            f"({'GPU window cut' if win.get('cut') else 'kernels lost'}), their time unknown"
            if win.get("unrecorded_launches") else "")
    return [f"  GPU time {'recorded ' if lost else ''}{duration(a['total_us'])} = {' + '.join(parts)}"
            + (f": the report accounts for {share:.1%} of it" if share is not None else "") + lost]


def _step_deltas(c: dict[str, Any], names: list[str], pct) -> list[str]:
    """The step's span, busy, idle and parts per run (overview/compare.py), then each run's limit."""
    st = c.get("steps")
    if not st or not st["rows"]:
        return []
    rows = [[r["figure"].replace("_us", "").replace("_", " ")] + [duration(v) if v is not None else "unknown" for v in r["values"]]
            + [("-" if r["delta_us"] < 0 else "") + duration(abs(r["delta_us"])) if r["delta_us"] is not None else "-",
               pct(r) if r["delta_us"] is not None else "-"] for r in st["rows"]]
    out = ["  " + line for line in _table(rows, ["step"] + list(names) + ["change", "%"])]
    out.extend(f"  limit in {cut(n, 40, keep_end=True)}: {s}" for n, s in st["limits"].items() if s)
    return out + [""]


def render_compare(c: dict[str, Any], top: int = 12) -> str:
    """The comparison of compare.compare_reports as text: summary, stage and layer-type deltas."""
    names = [cut(n, 24, keep_end=True) for n in c["runs"]]
    out = [c["summary"], f"  ({c['time_basis_note']})", ""]

    def pct(row):
        return f"{row['delta_pct']:+.0f}%" if row.get("delta_pct") is not None else "new"

    out.extend(_step_deltas(c, names, pct))
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
    if c["time_basis"] == "cpu":  # CPU runs have no kernels: the attention ops one run ran and the other did not
        ops = [(name, rows, (c.get("ops_only_in_counts") or {}).get(name, len(rows)))
               for name, rows in (c.get("ops_only_in") or {}).items()]
        if any(n for _, _, n in ops) and not any(n for _, _, n in only):
            out.append("")
        out.extend(f"  {plural(n, 'attention op')} only in {name}: "
                   + ", ".join(f"{o['name']} ({', '.join(o['stages'])})" for o in rows[:3]) + (", …" if n > 3 else "")
                   for name, rows, n in ops if n)
    changed = c.get("kernel_changes") or []
    if changed:
        out.append("")
        out.extend(f"  changed kernel: {k['message']}" for k in changed[:top])
    if decomposition_lines(c):
        out.extend([""] + decomposition_lines(c))
    out.extend(memory_text.render_compare(c.get("memory")))
    return "\n".join(out)
