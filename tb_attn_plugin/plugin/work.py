"""What runs inside an analysis worker process: one trace file in, one compact result out.

Kept apart from the plugin so that worker processes import the engine and msgspec only, never
TensorBoard or werkzeug. The result crosses the process boundary as (status, message, summary,
report bytes): the TensorBoard process never sees the trace's events, only the finished report.
"""

from __future__ import annotations

import os
from typing import Any

from ..report.spans import is_empty
from . import worker_limits


def summary_of(report: dict[str, Any]) -> dict[str, Any]:
    """The few fields /runs shows for every file without reading its report."""
    dev = report.get("device") or {}
    return {
        "kind": report.get("kind", "trace"),  # "memory_snapshot": a snapshot listed on its own
        "metadata": report.get("metadata") or {},
        "time_basis": report.get("time_basis"),
        "calls": report.get("calls"),
        "attention_share": report.get("attention_share"),
        "attention_gpu_us": report.get("attention_gpu_us"),
        "attention_cpu_us": report.get("attention_cpu_us"),
        "implementations": sorted({i.get("implementation") for i in report.get("implementations") or []
                                   if i.get("implementation")}),
        "device": dev.get("name"),
        "warnings": len(report.get("warnings") or []),
        "empty": is_empty(report),  # no step took time and no attention: never the default span
    }


def die_with_parent(pid: int) -> None:
    """Worker initializer: end this worker when the plugin's process ``pid`` ends, however it ends
    (a SIGKILL, an interrupted script). Its parent is the forkserver, which stays while any worker
    holds its pipe, so nothing else would stop a worker busy with a hostile file."""
    import select
    import threading

    def watch():
        try:
            fd = os.pidfd_open(pid)  # Linux 5.3+: readable once pid exits, no polling
            select.select([fd], [], [])
        except (AttributeError, OSError):
            import time

            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except OSError:
                    pass
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="tb-attn-parent-watch", daemon=True).start()


def _apply(env: dict[str, str | None] | None) -> None:
    """The TensorBoard process's settings for this task (see pool.remote_env); None unsets one."""
    import os

    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def analyze(path: str, display_name: str, env: dict[str, str] | None = None, snapshots: list[str] | None = None
            ) -> tuple[str, str | None, dict[str, Any], bytes | None]:
    """``snapshots``: the memory snapshots the plugin's listing found joining this trace."""
    import msgspec

    _apply(env)

    from ..format.errors import TraceError
    from ..memory.engine import is_snapshot_path, snapshot_report
    from ..report.build import analyze_file

    bad = worker_limits.apply() or _use_patterns()
    if bad:
        return "error", f"{display_name}: {bad}", {}, None
    try:
        # A snapshot listed on its own (layout: a directory without traces) has memory only.
        report = snapshot_report(path) if is_snapshot_path(path) else analyze_file(path, snapshots=snapshots)
    except TraceError as exc:
        return "error", f"{display_name}: {_strip_root(exc.cause, _root(path, display_name))}", {}, None
    except MemoryError:
        return "error", f"{display_name}: not enough memory to analyse this trace{worker_limits.describe_memory()}", {}, None
    except worker_limits.CpuTimeExceeded:
        return "error", f"{display_name}: {_cpu_message('analysis')}", {}, None
    except Exception as exc:  # an engine bug must not look like a bad trace, nor kill the worker
        return "error", f"{display_name}: analysis failed ({type(exc).__name__}: {exc}); please report this", {}, None
    if (report.get("trace") or {}).get("truncated"):
        cut = [w for w in report.get("warnings") or [] if "ends early" in w] or ["it ends early"]
        # Partial numbers would mislead (GPU kernels come late in a trace, so even the time basis can
        # flip), so an incomplete file is an error; if it is still growing it is analysed again.
        return "error", (f"{display_name}: the trace is incomplete ({cut[-1]}); wait until it is written in "
                         "full, or copy it again"), {}, None
    # The report names the file as the user knows it (relative to the logdir): the server's own
    # absolute paths never reach a browser, not even inside a warning about a joining snapshot.
    report["source"]["path"] = display_name
    _relative(report, path, display_name)
    return "ready", None, summary_of(report), msgspec.json.encode(report)



def _cpu_message(what: str) -> str:
    return (f"{what} stopped after {os.environ.get(worker_limits.CPU_ENV) or worker_limits.DEFAULT_CPU_S} s "
            f"of CPU time ({worker_limits.CPU_ENV})")


def _root(path: str, display_name: str) -> str:
    """The logdir's absolute prefix of ``path`` (display_name is the path relative to it), or ''."""
    rel = display_name.replace("\\", "/")
    norm = path.replace("\\", "/")
    return norm[: len(norm) - len(rel)] if rel and norm.endswith(rel) and len(norm) > len(rel) else ""


def _strip_root(text: str, root: str) -> str:
    return text.replace(root, "") if root and root in text else text


def _relative(x: Any, path: str, display_name: str) -> None:
    """Every string of the report (warnings, snapshot errors, frames) with the logdir's prefix removed."""
    root = _root(path, display_name)
    if root:
        _walk_strings(x, root)


def _walk_strings(x: Any, root: str) -> None:
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        if isinstance(v, str):
            if root in v:
                x[k] = v.replace(root, "")
        elif isinstance(v, (dict, list)):
            _walk_strings(v, root)


_installed: str | None = None  # fingerprint of the pattern files this worker has loaded


def _use_patterns() -> str | None:
    """Load TB_ATTN_PATTERNS (again only when the files changed); the one-line error, or None."""
    global _installed
    from ..attention import patterns
    from ..attention.user_table import ENV, PatternError, fingerprint, install_from_env

    fp = fingerprint()
    if fp == _installed:
        return None
    try:
        install_from_env()
    except PatternError as exc:
        patterns.set_user_families(())
        _installed = None
        # The file by its name only: the server's directories are no browser's business (the
        # TensorBoard log, plugin._check_patterns, has the whole path).
        return f"{ENV}: {_strip_root(str(exc), os.path.dirname(exc.path) + os.sep)}"
    _installed = fp
    return None


def annotate(path: str, out: str, env: dict[str, str] | None = None) -> tuple[str, str | None]:
    """Write the annotated copy of ``path`` to ``out`` (a temporary file of the plugin's); (status, message)."""
    _apply(env)
    from ..format.errors import TraceError
    from ..report.annotate import annotate as run

    bad = worker_limits.apply() or _use_patterns()
    if bad:
        return "error", bad
    try:
        run(path, out)
    except TraceError as exc:
        # Neither the plugin's private output directory nor the logdir's place on the server.
        return "error", _strip_root(_strip_root(str(exc.cause), os.path.dirname(out) + os.sep), os.path.dirname(path) + os.sep)
    except MemoryError:
        return "error", f"not enough memory to annotate this trace{worker_limits.describe_memory()}"
    except worker_limits.CpuTimeExceeded:
        return "error", _cpu_message("annotation")
    except Exception as exc:
        return "error", f"annotation failed ({type(exc).__name__}: {exc}); please report this"
    return "ready", None
