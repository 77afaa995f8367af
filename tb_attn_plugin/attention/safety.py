"""The safety net: kernels named like attention that no family and no call explains are reported, not dropped.

A kernel whose name says attention (attn, attention, fmha, flash, sdpa, paged, sage, mla, mha, ...)
but that matches no attention family of the table and is in no attention call would otherwise
vanish from the report without a trace. Each such name is listed with its count, GPU time, share of
all GPU time and a ready-to-edit ``[[family]]`` row for ``--patterns FILE`` (user_table.py).
"""

from __future__ import annotations

import re
from typing import Any

from ..trace.link import Linked
from . import patterns as P
from .user_table import toml_row

# Substrings that say attention wherever they stand, and words that do only as a whole token
# ("sage" in "message" or "mla" in "mlaunch" do not).
HINT_SUBSTRINGS = ("attn", "attention", "fmha", "sdpa", "flash")
HINT_TOKENS = frozenset({"mha", "mqa", "gqa", "mla", "sage", "paged"})
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
MAX_ROWS = 50


def looks_like_attention(name: str) -> bool:
    low = name.lower()
    if any(s in low for s in HINT_SUBSTRINGS):
        return True
    return any(t.lower() in HINT_TOKENS for t in _TOKEN.findall(name))


def _suggested_stage(name: str) -> tuple[str, str]:
    low = name.lower()
    ps = "bwd" if ("bwd" in low or "backward" in low) else "fwd"
    if re.search(r"combine|reduce|merge", low):
        return "split_kv_reduce", ps
    if "quant" in low:
        return "quantize", ps
    if "cache" in low and ("write" in low or "append" in low or "store" in low or "reshape" in low):
        return "kv_cache_write", ps
    if "preprocess" in low:
        return "preprocess", ps
    return "fused", ps


def _row_name(name: str) -> str:
    stem = re.split(r"[<(]", name, maxsplit=1)[0].strip().split(" ")[-1]
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", stem).strip("_")
    return (stem or "my_attention")[:60]


def unknown_kernels(L: Linked, call_of: list[int], kernel_call: dict[int, int], total_gpu_us: float
                    ) -> list[dict[str, Any]]:
    """Attention-looking kernels outside every call whose family is not an attention family."""
    acc: dict[str, list[float]] = {}
    verdict: dict[str, bool] = {}
    for k in L.kernels:
        name = k.ev.name
        if k.op >= 0 and call_of[k.op] >= 0 or id(k) in kernel_call:
            continue
        hit = verdict.get(name)
        if hit is None:
            fam = P.kernel_family(name)
            # exclusions are known not to be attention; fused and helper families are known attention
            hit = verdict[name] = looks_like_attention(name) and (fam is None or fam.stage in P.CONTEXT_STAGES)
        if hit:
            row = acc.setdefault(name, [0, 0.0])
            row[0] += 1
            row[1] += k.ev.dur
    out = []
    for name, (n, us) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:MAX_ROWS]:
        stage, ps = _suggested_stage(name)
        out.append({"name": name, "count": int(n), "gpu_us": round(us, 3),
                    "share": round(us / total_gpu_us, 6) if total_gpu_us > 0 else 0.0,
                    "toml": toml_row(name, _row_name(name), stage, ps)})
    return out


def warning_line(rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    share = sum(r["share"] for r in rows)
    first = rows[0]["name"]
    more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
    one = len(rows) == 1
    return (f"{len(rows)} kernel name{'' if one else 's'} look{'s' if one else ''} like attention "
            f"but match{'es' if one else ''} no kernel family and no attention call ({share:.1%} of GPU time): "
            f"{first[:100]!r}{more}; "
            "if it is attention, add a [[family]] row with --patterns FILE (rows ready to edit: unknown_kernels)")
