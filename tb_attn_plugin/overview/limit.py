"""What limits the step, in one sentence with the figure that shows it: the largest part of the GPU span
over all steps (idle: the host, or a synchronisation; exposed communication; attention; other matmul;
other compute; memcpy). The attention advice that follows is read in its light."""

from __future__ import annotations

from typing import Any

# part -> (limit kind, the figure that shows it ({p}: its share of the span), what the sentence calls it)
KINDS = {
    "idle": ("host", "the GPU is idle {p} of the step", "the host"),
    "communication": ("communication", "communication not hidden under compute is {p} of the step", "communication"),
    "attention": ("attention", "attention kernels are {p} of the step", "attention"),
    "other_matmul": ("matmul", "matmul outside attention is {p} of the step",
                     "matmul outside attention (projections, MLP)"),
    "other_compute": ("other_compute", "other compute kernels are {p} of the step",
                      "other compute (elementwise, normalisation, ...)"),
    "memcpy": ("memcpy", "memory copies are {p} of the step", "memcpy"),
    "memset": ("memset", "memsets are {p} of the step", "memset"),
}
CLOSE = 0.9  # a runner-up within 10% of the first is named too


def _pct(x: float) -> str:
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def limit(total: dict[str, Any] | None, calls: int = 1) -> dict[str, Any]:
    """Limit (format/report/overview.py) of the steps' summed figures."""
    if total is None or total.get("gpu_span_us") is None:
        return {"kind": "unknown", "part": None, "share": None, "us": None,
                "sentence": "what limits the step is unknown: the trace recorded no GPU activity"}
    if total["gpu_span_us"] <= 0:
        return {"kind": "unknown", "part": None, "share": None, "us": None,
                "sentence": "what limits the step is unknown: its GPU activities take no time (a 0 µs span)"}
    span = total["gpu_span_us"]
    parts = {p["part"]: p["us"] for p in total["parts"]}
    if "not_recorded" in parts:
        return {"kind": "unknown", "part": None, "share": None, "us": None,
                "sentence": "what limits the step is unknown: the GPU window was cut (kernel launches without their "
                            f"kernels), so {parts['not_recorded'] / 1e3:.2f} ms of the span is not known to be idle"}
    merged = {"attention": parts.get("attention_fwd", 0.0) + parts.get("attention_bwd", 0.0)}
    merged.update((k, v) for k, v in parts.items() if not k.startswith("attention_"))
    ranked = sorted(((v, k) for k, v in merged.items() if k in KINDS), reverse=True)
    us, part = ranked[0]
    kind, figure, what = KINDS[part]
    if part == "idle" and (total.get("idle_sync_us") or 0) > (total.get("idle_host_us") or 0):
        kind, what = "synchronisation", "a synchronisation (the host waits in a cuda/hip ...Synchronize call)"
    busy = total["busy_us"]
    att = merged["attention"]
    lead = ("no attention call in this trace" if not calls else
            f"attention is {_pct(att / busy)} of busy time" if busy > 0 else "the GPU never ran")
    sentence = f"{lead}; {figure.format(p=_pct(us / span))}: {what} is the first limit"
    if len(ranked) > 1 and ranked[1][0] >= CLOSE * us and ranked[1][0] > 0:
        sentence += f", {KINDS[ranked[1][1]][2]} a close second ({_pct(ranked[1][0] / span)} of the step)"
    return {"kind": kind, "part": part, "share": round(us / span, 6), "us": round(us, 3), "sentence": sentence}
