"""Verdicts: what a person should conclude from a report, in one line each, most important first."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..text.units import bytes_text, flops_rate_text
from ..text.words import percent, plural

FUSED_IMPLS = {"flash", "efficient", "cudnn", "aotriton", "ck", "flash_attn", "flex", "serving", "cpu_fused", "fused"}


_fmt_bytes = bytes_text


STAGE_WORDS = {"qkv_proj": "the QKV projection", "qk_matmul": "QKᵀ", "scale_mask": "scale & mask",
               "softmax": "softmax", "dropout": "dropout", "av_matmul": "AV", "out_proj": "the output projection",
               "fused": "the fused kernel", "other": "other work (copies, layout)"}


EAGER_IMPLS = ("eager", "mha_fastpath")


def _eager_stage_times(r: dict[str, Any], key: str) -> Counter:
    """Stage times of the eager calls alone (their layer rows), so that the eager verdict never names a
    stage that only other calls ran (the fused kernel of a model's SDPA layers, say)."""
    out: Counter = Counter()
    for lay in r["layers"]:
        if any(impl in EAGER_IMPLS for impl in lay.implementation.split("+")):
            for s in lay.stages:
                out[s.stage] += getattr(s, key)
    return out


def _largest(stage_t: Counter, att: float, whose: str = "attention time") -> str:
    """"softmax takes 51% of attention time", or the largest stage named when it is neither softmax nor a
    matmul and outweighs softmax (scale & mask, other, a projection), with softmax's share beside it. The
    projections count: 'other work takes the most' beside a QKV projection of 49% would be untrue."""
    soft = stage_t.get("softmax", 0.0) / att * 100
    top = max(stage_t, key=stage_t.__getitem__) if stage_t else "softmax"
    if top in ("softmax", "qk_matmul", "av_matmul") or stage_t.get(top, 0.0) <= stage_t.get("softmax", 0.0):
        return f"softmax takes {soft:.0f}% of {whose}"
    return (f"{STAGE_WORDS.get(top, top)} takes the most, {stage_t[top] / att * 100:.0f}% of {whose} "
            f"(softmax {soft:.0f}%)")


def verdicts(r: dict[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    basis = r["time_basis"]
    key = "gpu_us" if basis == "gpu" else "cpu_us"
    layers = r["layers"]
    if not layers:
        out.append({"id": "no_attention", "severity": "info",
                    "message": "no attention found in this trace"})
        return out

    stage_t: Counter = Counter()
    for s in r["stages"]:
        stage_t[s["stage"]] += s[key]
    att = sum(stage_t.values()) or 1.0
    calls_by_impl: Counter = Counter()
    for lay in layers:
        for impl in lay.implementation.split("+"):
            calls_by_impl[impl] += lay.calls

    math_calls = calls_by_impl.get("math", 0)
    if math_calls:
        sev = "warn" if basis == "gpu" else "info"
        out.append({"id": "math_fallback", "severity": sev,
                    "message": f"SDPA ran the math backend in {plural(math_calls, 'call')}: QKᵀ, softmax and AV run as separate "
                               "kernels; check dtype, head dim, mask and dropout against the fused backends' limits"})
    eager = calls_by_impl.get("eager", 0) + calls_by_impl.get("mha_fastpath", 0)
    if eager:
        eager_t = _eager_stage_times(r, key)
        mixed = eager < sum(lay.calls for lay in layers)  # fused calls too: shares of the eager calls' time
        if mixed and sum(eager_t.values()) > 0:
            largest = _largest(eager_t, sum(eager_t.values()), "their attention time")
        else:
            largest = _largest(stage_t, att)
        out.append({"id": "eager_attention", "severity": "warn",
                    "message": f"eager attention in {plural(eager, 'call')}: {largest}; "
                               "SDPA would fuse QKᵀ, softmax and AV"})
    mm = stage_t.get("qk_matmul", 0.0) + stage_t.get("av_matmul", 0.0)
    if stage_t.get("softmax", 0.0) > mm > 0:
        out.append({"id": "softmax_dominates", "severity": "warn",
                    "message": f"softmax ({stage_t['softmax'] / att:.0%} of attention) costs more than both matmuls "
                               f"together ({mm / att:.0%}): the score matrix is memory-bound"})
    if stage_t.get("other", 0.0) / att > 0.3:
        out.append({"id": "copies_dominate", "severity": "warn",
                    "message": f"copies, layout changes and helper kernels take {stage_t['other'] / att:.0%} of "
                               "attention time"})
    fused = {impl: n for impl, n in calls_by_impl.items() if impl in FUSED_IMPLS}
    if fused:
        desc = ", ".join(f"{impl} in {plural(n, 'call')}" for impl, n in sorted(fused.items(), key=lambda kv: -kv[1]))
        out.append({"id": "fused_running", "severity": "info", "message": f"fused attention running: {desc}"})
    dev = r.get("device") or {}
    peak = dev.get("peak_tflops")
    best = [lay for lay in layers if lay.tflops]
    if best and basis == "gpu":
        lay = max(best, key=lambda x: x.gpu_us)
        msg = f"{lay.layer_type} achieves {flops_rate_text(lay.tflops)} in its attention core"
        if peak:
            msg += f", {percent(lay.tflops / peak)} of the {dev.get('name')} dense 16-bit peak ({flops_rate_text(peak)})"
        out.append({"id": "tflops", "severity": "info", "message": msg})
    roof_rows = (r.get("roofline") or {}).get("layers") or []
    if roof_rows and roof_rows[0].get("bound"):  # the slowest layer type's bound, with its number
        out.append({"id": "roofline", "severity": "info", "message": roof_rows[0]["line"]})
    scores = [lay for lay in layers if lay.score_bytes]
    if scores:
        lay = max(scores, key=lambda x: x.score_bytes)
        out.append({"id": "score_matrix", "severity": "info",
                    "message": f"{lay.layer_type} materialises a {_fmt_bytes(lay.score_bytes)} score matrix per "
                               "call (B·H·Lq·Lk); a fused kernel never writes it to memory"})
    return out
