"""The report's run-wide parts: the file, the totals, steps, attention's kernels and ops, the trace's counts, warnings."""

from __future__ import annotations

import os
from typing import Any

from ..attention.detect import Call
from ..attention.metrics import Measured
from ..trace import discover
from ..trace.read import file_size
from .layers import Totals

MAX_KERNEL_ROWS = 2000
MAX_OP_ROWS = 500


def source(path: str, size: int) -> dict[str, Any]:
    name = os.path.basename(path.rstrip("/"))
    parsed = discover.parse_name(name)
    try:
        on_disk = file_size(path)
    except Exception:
        on_disk = None
    return {"path": path, "file": name, "worker": parsed[0] if parsed else name, "span": parsed[1] if parsed else "",
            "size_bytes": on_disk, "json_bytes": size}


def totals(t: Totals, m: Measured, calls: list[Call], has_gpu: bool) -> dict[str, Any]:
    """The run's and attention's time, attention's share of it, and the number of calls."""
    att_gpu = sum(x.gpu_us for x in t.run_cells.values())
    att_cpu = sum(x.cpu_us for x in t.run_cells.values())
    total = m.total_gpu_us if has_gpu else m.total_cpu_us
    share = (att_gpu if has_gpu else att_cpu) / total if total > 0 else 0.0
    return {"total_gpu_us": round(m.total_gpu_us, 3), "total_cpu_us": round(m.total_cpu_us, 3),
            "attention_gpu_us": round(att_gpu, 3), "attention_cpu_us": round(att_cpu, 3),
            "attention_share": round(share, 6), "calls": len(calls)}


def steps(t: Totals, m: Measured, L) -> list[dict[str, Any]]:
    step_ids = sorted(set(L.steps) | {s for s in m.step_gpu if s >= 0})
    return [{"step": s, "gpu_us": round(m.step_gpu.get(s, 0.0), 3), "cpu_us": round(m.step_cpu.get(s, 0.0), 3),
             "attention_gpu_us": round(t.step_att_gpu.get(s, 0.0), 3),
             "attention_cpu_us": round(t.step_att_cpu.get(s, 0.0), 3), "calls": t.step_calls.get(s, 0)}
            for s in step_ids]


def implementations(t: Totals) -> list[dict[str, Any]]:
    return [{"layer_type": lt, "implementation": im, "calls": n}
            for (lt, im), n in sorted(t.impl_counts.items(), key=lambda kv: -kv[1])]


def kernels(m: Measured) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"name": k[0], "stage": k[1], "pass": k[2], "implementation": k[3], "count": int(v[0]),
             "gpu_us": round(v[1], 3)} for k, v in m.kernel_rows.items()]
    rows.sort(key=lambda r: -r["gpu_us"])
    return rows[:MAX_KERNEL_ROWS]


def ops(m: Measured) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"name": k[0], "stage": k[1], "pass": k[2], "count": int(v[0]), "cpu_us": round(v[1], 3)}
            for k, v in m.op_rows.items()]
    rows.sort(key=lambda r: -r["cpu_us"])
    return rows[:MAX_OP_ROWS]


def trace_counts(ev, L) -> dict[str, Any]:
    """The trace's counts; ``truncated`` is set once the whole report is written (report/build.py)."""
    return {"events": ev.total_events, "kernels": len(L.kernels), "ops": len(L.names),
            "unlinked_kernels": L.unlinked_kernels, "graph_kernels": L.graph_kernels, "backward_links": len(L.fwd_of)}


def first_warnings(ev, calls: list[Call]) -> list[str]:
    """The reader's warnings and the calls' (sections written later add theirs to this list)."""
    return list(ev.warnings) + _backward_only_warning(calls) + _from_kernels_warning(calls)


def _from_kernels_warning(calls: list[Call]) -> list[str]:
    n = sum(1 for c in calls if c.info.get("from_kernels"))
    if not n:
        return []
    return [f"{n} attention call{'s were' if n > 1 else ' was'} found from kernels only (no CPU op launched them: "
            "batched GEMM, softmax, batched GEMM on one stream), with lower confidence than calls found from ops: "
            "no layer names or shapes; record CPU activity with record_shapes=True for those"]


def _backward_only_warning(calls: list[Call]) -> list[str]:
    n = sum(1 for c in calls if c.info.get("backward_only"))
    if not n:
        return []
    return [f"{n} attention call{'s are' if n > 1 else ' is'} backward only: the forward ran before the profiled "
            "window (or autograd links it to no attention call), so forward time, shapes and FLOPs are missing for them"]
