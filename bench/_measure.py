"""Measuring one piece of work in a fresh interpreter: wall time and peak resident memory.

Each measurement starts a new Python process (any interpreter: the project's venv or a tool's own
venv under bench/out/venvs/), lets it import what it needs, then times only the work and reads the
peak resident set (VmHWM) before and after it. The work runs in that one process (no worker
processes are started by any measured tool as it is called here). The child prints one JSON line; the parent keeps the best of a few.

    from _measure import child_code, measure
    code = child_code(setup="import orjson", work="n = len(orjson.loads(open(PATH, 'rb').read())['traceEvents'])")
    measure(sys.executable, code, path, repeat=3)  # {"seconds", "peak_growth_mb", "peak_rss_mb", "import_s", "n"}

Reported per run:
  seconds         the work alone, after imports (what a user waits for once the tool is loaded)
  import_s        the imports before it
  peak_growth_mb  peak RSS minus RSS after imports: the memory the work itself needed
  peak_rss_mb     peak RSS of the whole process (imports included), as `top` would show it
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

_TEMPLATE = """\
import gc, json, resource, sys, time
def _hwm_kb():
    # VmHWM: the peak RSS of this process's memory since exec. Not ru_maxrss: Linux carries the parent's
    # RSS at fork time into the child's ru_maxrss across exec, so a parent holding 300 MB makes every
    # child report at least 300 MB.
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
PATH = sys.argv[1]
ARGS = sys.argv[2:]
_t_imp = time.perf_counter()
{setup}
_import_s = time.perf_counter() - _t_imp
gc.collect()
_base = _hwm_kb()
n = None
extra = None
_t0 = time.perf_counter()
{work}
_dt = time.perf_counter() - _t0
_peak = _hwm_kb()
print(json.dumps({{"seconds": _dt, "import_s": _import_s, "peak_growth_mb": (_peak - _base) / 1024,
                  "peak_rss_mb": _peak / 1024, "n": n, "extra": extra}}, default=str))
"""


def child_code(setup: str, work: str) -> str:
    """A child script: ``setup`` (imports) untimed, ``work`` timed; ``work`` may set ``n`` and ``extra``."""
    return _TEMPLATE.format(setup=textwrap.dedent(setup).strip(), work=textwrap.dedent(work).strip())


def run_once(python: str, code: str, path: str, *args: str, cwd: str | None = None, timeout: float = 1800,
             env: dict | None = None) -> dict:
    """One fresh process. Returns the child's JSON, or {"error": why} when it failed or timed out."""
    try:
        out = subprocess.run([python, "-c", code, path, *args], capture_output=True, text=True, cwd=cwd,
                             timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {out.returncode}: {tail[:300]}"}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"error": f"unreadable output: {lines[-1][:200]}"}


def measure(python: str, code: str, path: str, *args: str, repeat: int = 3, **kw) -> dict:
    """Best (lowest) time and memory over ``repeat`` fresh processes; an error if any run failed."""
    runs = []
    for _ in range(max(1, repeat)):
        r = run_once(python, code, path, *args, **kw)
        if "error" in r:
            return r
        runs.append(r)
    best = dict(runs[0])
    for k in ("seconds", "import_s", "peak_growth_mb", "peak_rss_mb"):
        best[k] = min(r[k] for r in runs)
    best["runs"] = len(runs)
    return best


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")
