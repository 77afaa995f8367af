"""tb-attn side by side with the tools a user would pick instead: speed, memory and the numbers.

Speed and memory. On traces built by replicating a real one N times as N steps (bench/make_trace.py;
x1, x4, x16 by default), each of these runs REPEAT times, each time in a fresh process, and the best
wall time and peak memory are kept (bench/_measure.py):

  tb-attn        analyze_file(path): read, decode, link, detect, measure, build the report
  tb-profiler    torch-tb-profiler 0.4.3 as its RunLoader worker calls it: RunProfileData.parse,
                 RunGenerator.generate_run_profile, DistributedRunProfileData (without the extra
                 process and queue RunLoader wraps around them)
  tb-profiler-loader  the whole RunLoader(...).load(), as the PyTorch Profiler tab runs it per run:
                 a spawned worker process, and the profile pickled back through a Queue
  HTA            holistictraceanalysis: TraceAnalysis(trace_dir) (parse the trace into its
                 DataFrame, align and filter), the object every HTA analysis starts from
  json / orjson  json.loads / orjson.loads of the file: a floor, no analysis at all

Correctness. On the real traces in ../shared/traces, the GPU time of the attention ops as each tool
reports it: tb-attn (its report's kernels, by stage), torch-tb-profiler (the operator view's
device_total_duration) and HTA (kernels linked to their launch by HTA's own correlation index, summed
under every CPU op of that name that encloses the launch).

The two tools are installed by this script into their own venv, bench/out/venvs/tools (pandas, numpy,
...; never torch), so the project venv stays as it is. A tool that cannot be installed or imported is
skipped with a message, and its columns say so.

    .venv/bin/python bench/compare_tools.py                          # OWLv2 trace x1 x4 x16, 3 runs each
    .venv/bin/python bench/compare_tools.py --copies 1 4 --repeat 1  # quick
    .venv/bin/python bench/compare_tools.py --update-readme          # also rewrite bench/README.md's section

Writes bench/out/compare/results.json and results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(REPO, "..", "shared", "traces")
sys.path.insert(0, HERE)
from _measure import child_code, measure, run_once, venv_python  # noqa: E402

DEFAULT_SRC = "tl_h100_owlv2_eager_bmm_softmax"
TBP_VERSION = "0.4.3"
HTA_VERSION = "0.5.0"
# Only what the measured code paths import; HTA's jupyterlab and pytest requirements are for notebooks and its tests.
# pandas < 3: HTA 0.5.0 fails under pandas 3 on traces whose ids fit a small int dtype
# ("Invalid value ... for dtype 'int8'" in transform_correlation_to_index: pandas 3 no longer upcasts on assignment).
COMMON_DEPS = ["pandas<3", "numpy", "absl-py"]
HTA_DEPS = ["networkx", "plotly", "pydot", "psutil", "pyyaml"]

# -- the measured work, one child script per tool ---------------------------------------------------

TBP_SETUP = """
import logging, tempfile
logging.disable(logging.WARNING)
from torch_tb_profiler.profiler.data import DistributedRunProfileData, RunProfileData
from torch_tb_profiler.profiler.run_generator import RunGenerator
_cache = tempfile.mkdtemp(prefix="tbp-cache-")
"""
TBP_WORK = """
data = RunProfileData.parse("worker0", None, PATH, _cache)
profile = RunGenerator("worker0", None, data).generate_run_profile()
dist = DistributedRunProfileData(data)
n = len(data.events) if getattr(data, "events", None) is not None else None
"""
# The operator view: total GPU time of the kernels each op launched, its children's included (µs).
TBP_OPS = TBP_WORK + """
want = set(ARGS)
extra = {r["name"]: {"gpu_us": r["device_total_duration"], "calls": r["calls"]}
         for r in profile.operation_table_by_name["data"] if r["name"] in want}
"""

# The whole RunLoader as the plugin runs it per run: a spawned worker process parses and generates, then
# sends the profile back pickled through a multiprocessing Queue. Its memory is the larger of this
# process's growth and the worker's peak (the worker's ru_maxrss, less this process's size when it spawned it).
TBPL_SETUP = """
import logging, multiprocessing, os, tempfile
logging.disable(logging.WARNING)
from torch_tb_profiler import io as tbp_io
from torch_tb_profiler.profiler.loader import RunLoader
_d = tempfile.mkdtemp(prefix="tbp-run-")
os.symlink(os.path.abspath(PATH), os.path.join(_d, "worker0.pt.trace.json"))
_caches = tbp_io.Cache(tempfile.mkdtemp(prefix="tbp-cache-"))
"""
TBPL_WORK = """
run = RunLoader("run", _d, _caches).load()
multiprocessing.active_children()  # joins the finished worker, so RUSAGE_CHILDREN counts it
n = len(run.get_profiles() or [])  # one profile per worker and span; none when the worker failed
if not n:
    raise SystemExit("RunLoader loaded no profile: its worker failed")
extra = {"child_peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
         "parent_rss_mb": _base / 1024}
"""

HTA_SETUP = """
import logging, os, tempfile
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
# HTA reads every trace file of a directory; give it a directory holding only this one.
_d = tempfile.mkdtemp(prefix="hta-")
os.symlink(os.path.abspath(PATH), os.path.join(_d, os.path.basename(PATH)))
"""
HTA_WORK = """
ta = TraceAnalysis(trace_dir=_d, include_last_profiler_step=True)
n = len(ta.t.get_trace(0))
"""
HTA_OPS = HTA_WORK + """
import numpy as np
t = ta.t
df = t.get_trace(0)
t.symbol_table.decode_df(df, create_new_columns=True)
kern = df[(df["stream"] >= 0) & (df["s_cat"] == "kernel")]
linked = kern[kern["index_correlation"] >= 0]
launch = df.loc[linked["index_correlation"].values]
lk = {"pid": launch["pid"].values, "tid": launch["tid"].values, "ts": launch["ts"].values,
      "end": (launch["ts"] + launch["dur"]).values, "dur": linked["dur"].values.astype(float)}
extra = {"_kernels": int(len(kern)), "_linked": int(len(linked)), "_kernel_us": float(kern["dur"].sum())}
for op in ARGS:
    ops = df[df["s_name"] == op]
    total, launched = 0.0, 0
    for (pid, tid), g in ops.groupby(["pid", "tid"]):
        g = g.sort_values("ts")
        starts, ends = g["ts"].values, np.maximum.accumulate((g["ts"] + g["dur"]).values)
        m = (lk["pid"] == pid) & (lk["tid"] == tid)
        i = np.searchsorted(starts, lk["ts"][m], side="right") - 1
        inside = (i >= 0) & (ends[np.clip(i, 0, None)] >= lk["end"][m])
        total += float(lk["dur"][m][inside].sum())
        launched += int(inside.sum())
    extra[op] = {"gpu_us": total, "calls": int(len(ops)), "kernels": launched}
"""

TBA_SETUP = "from tb_attn_plugin.report.build import analyze_file"
TBA_WORK = """
r = analyze_file(PATH)
n = r["trace"]["events"]
"""
TBA_OPS = TBA_WORK + """
extra = {"kernels": r["kernels"], "attention_gpu_us": r["attention_gpu_us"], "calls": r["calls"]}
"""

JSON_WORK = {
    "json": ("import json", "with open(PATH, 'rb') as fh:\n    doc = json.loads(fh.read())\nn = len(doc['traceEvents'])"),
    "orjson": ("import orjson", "with open(PATH, 'rb') as fh:\n    doc = orjson.loads(fh.read())\nn = len(doc['traceEvents'])"),
}

TOOLS = ("tb-attn", "tb-profiler", "tb-profiler-loader", "HTA", "json", "orjson")

# -- correctness: the attention ops of each real trace, and what tb-attn calls the same GPU work ----
# (op name the other tools group by, tb-attn stages, tb-attn implementations or None for any)
CHECKS = {
    "tl_h100_bert_small_sdpa_flash": [("aten::scaled_dot_product_attention", {"fused"}, None)],
    "tl_mi300x_bert_small_sdpa_aotriton": [("aten::scaled_dot_product_attention", {"fused"}, None)],
    # torch.compile calls the flash op directly; there is no aten::scaled_dot_product_attention event
    "tl_mi300x_torch_compile_small": [("aten::_scaled_dot_product_flash_attention", {"fused"}, None)],
    "tl_h100_owlv2_eager_bmm_softmax": [("aten::bmm", {"qk_matmul", "av_matmul"}, None),
                                        ("aten::softmax", {"softmax"}, None)],
    "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph": [("aiter::fmha_v3_fwd", {"fused"}, {"ck"}),
                                                 ("aten::scaled_dot_product_attention", {"fused"}, {"aotriton"}),
                                                 ("aten::bmm", {"qk_matmul", "av_matmul"}, None),
                                                 ("aten::softmax", {"softmax"}, None)],
    "hta_a100_negative_log_softmax_fwdbwd": [("aten::log_softmax", {"softmax"}, None)],
}


# -- installing the other tools ---------------------------------------------------------------------

def _pip(py: str, *args: str) -> tuple[bool, str]:
    p = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                       capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip() and "is ignored" not in ln]
    return p.returncode == 0, (lines[-1] if lines else "")


def _imports(py: str, module: str) -> tuple[bool, str]:
    p = subprocess.run([py, "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    return p.returncode == 0, (p.stderr.strip().splitlines() or [""])[-1]


def ensure_tools(venv: str, log=print) -> dict[str, str | None]:
    """{"tb-profiler": python or None, "HTA": python or None, "why": {tool: reason}}. Installs once."""
    py = venv_python(venv)
    why: dict[str, str] = {}
    if not os.path.exists(py):
        log(f"creating {venv} for torch-tb-profiler and HTA (never torch) ...")
        p = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if p.returncode != 0:
            reason = f"cannot create a venv: {p.stderr.strip()[-200:]}"
            return {"tb-profiler": None, "HTA": None, "why": {"tb-profiler": reason, "HTA": reason}}
    out: dict = {"why": why}
    wanted = {
        "tb-profiler": ([f"torch-tb-profiler=={TBP_VERSION}"], COMMON_DEPS, "torch_tb_profiler.profiler.run_generator"),
        "HTA": ([f"holistictraceanalysis=={HTA_VERSION}"], COMMON_DEPS + HTA_DEPS, "hta.trace_analysis"),
    }
    for tool, (pkgs, deps, module) in wanted.items():
        ok1, m1 = _pip(py, *deps)  # quick when already satisfied; also moves an old venv to the pins
        ok, msg = _imports(py, module)
        if not ok:
            log(f"installing {' '.join(pkgs)} into {venv} ...")
            ok2, m2 = _pip(py, "--no-deps", *pkgs)  # its declared extras (tensorboard, jupyterlab) are not used here
            ok, msg = _imports(py, module)
            if not ok:
                msg = f"{msg} (pip: {m2 or m1})"
        if ok:
            out[tool] = py
        else:
            out[tool] = None
            why[tool] = f"not installed: {msg}"
            log(f"SKIPPING {tool}: {why[tool]}")
    return out


def tool_version(py: str, dist: str) -> str:
    p = subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                       capture_output=True, text=True)
    return p.stdout.strip() or "?"


# -- speed ------------------------------------------------------------------------------------------

def speed(tools: dict, path: str, repeat: int, timeout: float, only: list[str]) -> dict[str, dict]:
    res: dict[str, dict] = {}
    for tool in only:
        if tool == "tb-attn":
            r = measure(sys.executable, child_code(TBA_SETUP, TBA_WORK), path, repeat=repeat, cwd=REPO, timeout=timeout)
        elif tool in JSON_WORK:
            r = measure(sys.executable, child_code(*JSON_WORK[tool]), path, repeat=repeat, cwd=REPO, timeout=timeout)
        else:
            py = tools.get(tool.replace("-loader", ""))
            if py is None:
                res[tool] = {"error": tools["why"].get(tool, "not installed")}
                continue
            setup, work = {"tb-profiler": (TBP_SETUP, TBP_WORK), "tb-profiler-loader": (TBPL_SETUP, TBPL_WORK),
                           "HTA": (HTA_SETUP, HTA_WORK)}[tool]
            r = measure(py, child_code(setup, work), path, repeat=repeat, cwd=HERE, timeout=timeout)
            if "error" not in r and tool == "tb-profiler-loader":
                x = r["extra"]
                r["peak_growth_mb"] = max(r["peak_growth_mb"], x["child_peak_mb"] - x["parent_rss_mb"])
                r["peak_rss_mb"] = max(r["peak_rss_mb"], x["child_peak_mb"])
        res[tool] = r
        shown = r.get("error") or f"{r['seconds']:.2f} s, +{r['peak_growth_mb']:.0f} MB"
        print(f"  {os.path.basename(path)} {tool:<12} {shown}", flush=True)
    return res


def goals(rows: list[dict]) -> list[str]:
    """The issue's goals at x4 and x16: 10x faster than tb-profiler, 5x than HTA, less memory than both."""
    out = []
    for row in rows:
        if row["copies"] not in (4, 16):
            continue
        a = row["tools"].get("tb-attn", {})
        if not a or "error" in a:
            continue
        for tool, need in (("tb-profiler", 10.0), ("tb-profiler-loader", 10.0), ("HTA", 5.0)):
            if tool not in row["tools"]:
                continue  # not asked for in this run
            b = row["tools"][tool]
            if "error" in b:
                out.append(f"x{row['copies']} vs {tool}: not measured ({b.get('error', 'skipped')})")
                continue
            ratio = b["seconds"] / a["seconds"]
            mem_ok = a["peak_growth_mb"] < b["peak_growth_mb"] and a["peak_rss_mb"] < b["peak_rss_mb"]
            out.append(f"x{row['copies']} vs {tool}: {ratio:.1f}x faster (goal {need:.0f}x: "
                       f"{'met' if ratio >= need else 'MISSED'}); memory +{a['peak_growth_mb']:.0f} vs "
                       f"+{b['peak_growth_mb']:.0f} MB ({'below' if mem_ok else 'NOT below'})")
    return out


# -- correctness ------------------------------------------------------------------------------------

def correctness(tools: dict, names: list[str], timeout: float) -> list[dict]:
    rows = []
    for name in names:
        path = os.path.join(SHARED, f"{name}.json.gz")
        checks = CHECKS[name]
        ops = [c[0] for c in checks]
        got: dict[str, dict] = {"tb-attn": run_once(sys.executable, child_code(TBA_SETUP, TBA_OPS), path, cwd=REPO,
                                                    timeout=timeout)}
        # HTA rounds every timestamp of a float-µs trace in to whole µs (ts up, end down); "HTA exact" turns
        # that off with its own switch, HTA_DISABLE_NS_ROUNDING=1, to show what the rest of the difference is.
        for tool, (setup, work), env in (("tb-profiler", (TBP_SETUP, TBP_OPS), None), ("HTA", (HTA_SETUP, HTA_OPS), None),
                                         ("HTA exact", (HTA_SETUP, HTA_OPS), {"HTA_DISABLE_NS_ROUNDING": "1"})):
            py = tools.get(tool.split()[0])
            got[tool] = ({"error": tools["why"].get(tool, "not installed")} if py is None else
                         run_once(py, child_code(setup, work), path, *ops, cwd=HERE, timeout=timeout,
                                  env=dict(os.environ, **(env or {}))))
        for op, stages, impls in checks:
            row = {"trace": name, "op": op, "tb_attn_stages": sorted(stages)}
            a = got["tb-attn"]
            if "error" in a:
                row["tb-attn"] = {"error": a["error"]}
            else:
                ks = [k for k in a["extra"]["kernels"] if k["stage"] in stages
                      and (impls is None or k.get("implementation") in impls)]
                row["tb-attn"] = {"gpu_us": round(sum(k["gpu_us"] for k in ks), 1), "kernels": sum(k["count"] for k in ks)}
            for tool in ("tb-profiler", "HTA", "HTA exact"):
                g = got[tool]
                if "error" in g:
                    row[tool] = {"error": g["error"]}
                else:
                    v = (g.get("extra") or {}).get(op)
                    row[tool] = {"gpu_us": round(v["gpu_us"], 1), "calls": v["calls"], **(
                        {"kernels": v["kernels"]} if "kernels" in v else {})} if v else {"gpu_us": None, "note": "op not listed"}
            rows.append(row)
            print(f"  {name} {op}: " + "; ".join(
                f"{t} {row[t].get('gpu_us', row[t].get('error'))}" for t in ("tb-attn", "tb-profiler", "HTA", "HTA exact")), flush=True)
    return rows


# -- output -----------------------------------------------------------------------------------------

def _cell(r: dict, key: str, fmt: str) -> str:
    return "skipped" if not r else ("failed" if "error" in r else format(r[key], fmt))


def render(meta: dict, rows: list[dict], checks: list[dict], goal_lines: list[str]) -> str:
    L = [f"Command: `{meta['command']}`  ",
         f"Machine: {meta['machine']}; {meta['when']}; {meta['conditions']}  ",
         f"Versions: {meta['versions']}  ",
         f"Source trace: `{meta['src']}` replicated xN as N steps (bench/make_trace.py); "
         f"best of {meta['repeat']} fresh processes per cell. Time is the work after imports; memory is peak RSS "
         "growth over the process after its imports (whole-process peak RSS in brackets).", ""]
    if rows:
        tools = [t for t in TOOLS if any(t in r["tools"] for r in rows)]
        L.append("| copies | MB | events | " + " | ".join(f"{t} s" for t in tools) + " | "
                 + " | ".join(f"{t} / tb-attn" for t in tools if t != "tb-attn") + " |")
        L.append("|" + "---:|" * (3 + 2 * len(tools) - 1))
        for row in rows:
            a = row["tools"].get("tb-attn", {})
            cells = [str(row["copies"]), f"{row['mb']:.0f}", str(row["events"])]
            cells += [_cell(row["tools"].get(t, {}), "seconds", ".2f") for t in tools]
            for t in tools:
                if t == "tb-attn":
                    continue
                b = row["tools"].get(t, {})
                cells.append("-" if not a or not b or "error" in b or "error" in a
                             else f"{b['seconds'] / a['seconds']:.1f}x")
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        L.append("| copies | " + " | ".join(f"{t} MB" for t in tools) + " |")
        L.append("|" + "---:|" * (1 + len(tools)))
        for row in rows:
            cells = [str(row["copies"])]
            for t in tools:
                r = row["tools"].get(t, {})
                cells.append(_cell(r, "peak_growth_mb", ".0f") if not r or "error" in r
                             else f"+{r['peak_growth_mb']:.0f} ({r['peak_rss_mb']:.0f})")
            L.append("| " + " | ".join(cells) + " |")
        errs = sorted({f"{t}: {r['error']}" for row in rows for t, r in row["tools"].items() if "error" in r})
        if errs:
            L += ["", "Failed or skipped: " + "; ".join(errs)]
    if goal_lines:
        L += ["", "Goals (x4, x16):", ""] + [f"- {g}" for g in goal_lines]
    if checks:
        L += ["", "GPU time of the attention ops, real traces (µs; kernel count in brackets):", "",
              "| trace | op | tb-attn (stages) | torch-tb-profiler | HTA | HTA, no rounding |", "|---|---|---:|---:|---:|---:|"]
        for c in checks:
            def fmt(r):
                if "error" in r:
                    return "failed"
                if r.get("gpu_us") is None:
                    return r.get("note", "-")
                k = r.get("kernels")
                return f"{r['gpu_us']:.1f}" + (f" ({k})" if k is not None else "")
            L.append(f"| {c['trace']} | `{c['op']}` | {fmt(c['tb-attn'])} {'+'.join(c['tb_attn_stages'])} | "
                     f"{fmt(c['tb-profiler'])} | {fmt(c['HTA'])} | {fmt(c['HTA exact'])} |")
    return "\n".join(L) + "\n"


BEGIN, END = "<!-- compare_tools:begin -->", "<!-- compare_tools:end -->"


def update_readme(text: str) -> None:
    path = os.path.join(HERE, "README.md")
    doc = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    block = f"{BEGIN}\n{text}{END}"
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n## Against other tools\n\n" + block + "\n"
    with open(path, "w") as fh:
        fh.write(doc)
    print(f"updated {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=DEFAULT_SRC, help="a trace in ../shared/traces (stem) or a path")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per fresh process")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-correctness", action="store_true")
    ap.add_argument("--venv", default=os.path.join(HERE, "out", "venvs", "tools"))
    ap.add_argument("--out", default=os.path.join(HERE, "out", "compare"))
    ap.add_argument("--conditions", default="", help="free text for the record: load, other jobs, ...")
    ap.add_argument("--update-readme", action="store_true", help="rewrite the section in bench/README.md")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)  # children run in other directories
    from make_trace import replicate

    os.makedirs(args.out, exist_ok=True)
    others = set(args.tools) - {"tb-attn", "json", "orjson"}
    tools = ensure_tools(args.venv) if others or not args.no_correctness else {"why": {}}
    src = os.path.abspath(args.src) if os.path.exists(args.src) else os.path.join(SHARED, f"{args.src}.json.gz")
    stem = os.path.basename(src).split(".")[0]
    versions = [f"python {platform.python_version()}"]
    for tool, dist in (("tb-profiler", "torch-tb-profiler"), ("HTA", "holistictraceanalysis")):
        if tools.get(tool):
            versions.append(f"{dist} {tool_version(tools[tool], dist)}")
    import orjson

    from tb_attn_plugin.format.version import ENGINE_VERSION, __version__
    versions += [f"tb-attn {__version__} (engine {ENGINE_VERSION})", f"orjson {orjson.__version__}"]
    load = os.getloadavg()
    meta = {"command": " ".join(["python", "bench/compare_tools.py"] + [shlex.quote(a) for a in sys.argv[1:]]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "conditions": args.conditions or f"load average at start {load[0]:.1f}",
            "versions": ", ".join(versions), "src": os.path.basename(src), "repeat": args.repeat}

    rows = []
    if not args.no_speed:
        for n in args.copies:
            path = os.path.join(args.out, f"{stem}_x{n}.json")
            if not os.path.exists(path):
                print(f"building {path} ...", flush=True)
                events = replicate(src, n, path + ".part")
                with open(path + ".events", "w") as fh:
                    fh.write(str(events))
                os.replace(path + ".part", path)  # an interrupted build is never taken for a trace
            events = int(open(path + ".events").read()) if os.path.exists(path + ".events") else 0
            rows.append({"copies": n, "mb": os.path.getsize(path) / 1e6, "events": events,
                         "tools": speed(tools, path, args.repeat, args.timeout, args.tools)})
    checks = [] if args.no_correctness else correctness(tools, list(CHECKS), args.timeout)
    goal_lines = goals(rows)
    text = render(meta, rows, checks, goal_lines)
    print()
    print(text)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "speed": rows, "correctness": checks, "goals": goal_lines}, fh, indent=1)
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(text)
    if args.update_readme:
        update_readme(text)


if __name__ == "__main__":
    main()
