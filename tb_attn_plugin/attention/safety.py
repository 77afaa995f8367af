"""The safety net: kernels named like attention that no family and no call explains are reported, not dropped.

A kernel whose name says attention (attn, attention, fmha, flash, sdpa, paged, sage, mla, mha, ...)
but that matches no attention family of the table and is in no attention call would otherwise
vanish from the report without a trace. Each such name is listed with its count, GPU time, share of
all GPU time and a ready-to-edit ``[[family]]`` row for ``--patterns FILE`` (user_table.py).

The row's pattern is the most distinctive token of the name (never a wrapper that GEMMs share, such
as ``cutlass::device_kernel``), checked on the trace it came from: it matches no kernel name outside
the unknown set, so applying the row as offered never turns a GEMM into attention.
"""

from __future__ import annotations

import os
import re
from typing import Any

import msgspec
import numpy as np

from ..format.linear_regex import compile_linear
from ..trace.link import Linked
from . import kernel_path
from . import patterns as P
from .user_table import MAX_PATTERN, MAX_TEXT, installed_files, toml_row

# Substrings that say attention wherever they stand, and words that do only as a whole token
# ("sage" in "message" or "mla" in "mlaunch" do not).
HINT_SUBSTRINGS = ("attn", "attention", "fmha", "sdpa", "flash")
HINT_TOKENS = frozenset({"mha", "mqa", "gqa", "mla", "sage", "paged"})
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
MAX_ROWS = 50
# A C++ name, qualified or not: "flash::FlashAttnBwd", "cutlass::device_kernel", "quant_per_block".
_QUALIFIED = compile_linear(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
# Tokens that wrap or parametrise kernels of every kind, never a suggested pattern (unless the token
# itself says attention): (regex, example kernel name it wraps, source).
GENERIC_TOKENS: tuple[tuple[str, str, str], ...] = (
    (r"void|const|volatile|unsigned|signed|char|short|int|long|float|double|bool|true|false|auto|struct|class"
     r"|typename|operator|lambda|anonymous|namespace|unnamed|half|bfloat16|\w*int\d+_t|size_t",
     "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, true>(...)",
     "C++ keywords and scalar types in every demangled kernel name (issue 24: FA3 forward on H800)"),
    (r"cutlass::device_kernel|cutlass::Kernel2?|cutlass::\w+(::\w+)*|cute::\w+(::\w+)*",
     "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<...>, ...>, ...> >(...)",
     "source: NVIDIA/cutlass include/cutlass/device_kernel.h (the wrapper of every CUTLASS 3 kernel, GEMM or "
     "attention), include/cutlass/gemm/dispatch_policy.hpp; vllm-project/vllm PR #23280 profile "
     "'void cutlass::device_kernel<vllm::cutlass_3x_gemm_fp...'"),
    (r"at::native(::\w+)*|at::cuda(::\w+)*|c10::\w+|std::\w+(::\w+)*|__nv_\w+|__hip_\w+|ck_tile::kentry|ck_tile::\w+_t",
     "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(...)",
     "source: pytorch/pytorch aten/src/ATen/native/cuda/Loops.cuh (elementwise wrappers); ROCm/composable_kernel "
     "ck_tile kentry (the wrapper of every CK tile kernel)"),
    (r"triton_\w{0,4}|kernel|kernel\d*|Params|params|Arguments|Kargs",
     "triton_per_fused__softmax_0",
     "source: torch._inductor kernel names (triton_poi_/triton_red_/triton_per_ prefixes) and parameter structs"),
)
_GENERIC = compile_linear("|".join(f"(?:{rx})" for rx, _, _ in GENERIC_TOKENS))
MIN_TOKEN = 4  # characters: shorter tokens ("Sm90", "fwd") say nothing on their own
# Tails of a token that change from one compile to the next, and what the row's pattern puts in
# their place: (tail regex, its group 1 the tail, its pattern, example, source).
UNSTABLE_TAILS: tuple[tuple[str, str, str, str], ...] = (
    (r"(_object_at_\w*)$", r"_object_at_\w*",
     "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tensorptrbf16gmemalign16odiv8_0",
     "source: Dao-AILab/flash-attention flash_attn/cute/flash_fwd_sm100.py (CuTe DSL names a kernel "
     "kernel_cutlass_kernel_<module><class>_object_at_<argument descriptors>; the descriptors follow the arguments)"),
    (r"[A-Za-z](_\d+)$", r"_\d+", "triton_per_fused__softmax_0",
     "source: pytorch/pytorch torch/_inductor (a compiled graph numbers its kernels)"),
)
_TAILS = tuple((compile_linear(tail), rx) for tail, rx, _, _ in UNSTABLE_TAILS)  # group 1: the tail


# Softmax kernels the family table does not know (so no call is found from them) but whose name
# says softmax: the safety net looks for them between batched GEMMs too. Names of a family (log-softmax
# exclusions included) keep the family's class. (pattern, real example, source)
SOFTMAX_HINTS: tuple[tuple[str, str, str], ...] = (
    (r"softmax|SoftMax|Softmax|SOFTMAX",
     "void fastertransformer::softmax_kernel<__half, __half, 4>(__half*, __half const*, __half const*, __half const*, "
     "int, int, int, int, float)",
     "source: NVIDIA/FasterTransformer src/fastertransformer/kernels/unfused_attention_kernels.cu (template<typename T, "
     "typename T_IN, int ITEMS_PER_THREAD> __global__ void softmax_kernel(T* attn_score, const T_IN* qk, ...): the "
     "unfused attention's softmax between its batched QKᵀ and AV GEMMs; TensorRT-LLM keeps it as tensorrt_llm::kernels::softmax_kernel)"),
)
SOFTMAX_NOT: tuple[tuple[str, str, str], ...] = (
    (r"[Ll]og_?[Ss]oft[Mm]ax", "void log_softmax_kernel<float>(float*, float const*, int)",
     "a loss's log-softmax is never attention (shared trace hta_a100_negative_log_softmax_fwdbwd)"),
)
_SOFTMAX_HINT = re.compile("|".join(f"(?:{p})" for p, _, _ in SOFTMAX_HINTS))
_SOFTMAX_NOT = re.compile("|".join(f"(?:{p})" for p, _, _ in SOFTMAX_NOT))
_BACKWARD = re.compile(r"(?i)backward|bwd|_grad")


def net_class(name: str) -> int:
    """kernel_path.kernel_class, and for a name of no family that says softmax (not log-softmax), a
    softmax (backward when the name says so): what the safety net looks for between batched GEMMs."""
    k = kernel_path.kernel_class(name)
    if k != kernel_path.OTHER or P.kernel_family(name) is not None:
        return k
    if _SOFTMAX_HINT.search(name) and not _SOFTMAX_NOT.search(name):
        return kernel_path.SOFTMAX_BWD if _BACKWARD.search(name) else kernel_path.SOFTMAX_FWD
    return k


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


def _is_generic(token: str) -> bool:
    return _GENERIC.fullmatch(token) is not None and not looks_like_attention(token)


# A whole token without lookaround: users' rows are compiled by RE2 (safe_regex.py), which has none;
# rows are searched, so consuming the neighbouring character changes nothing.
_WHOLE_START, _WHOLE_END = r"(?:^|\W)", r"(?:\W|$)"


def _token_pattern(token: str) -> tuple[str, str]:
    """(pattern, its literal core) for a token: whole tokens only (flash::FlashAttnBwd must not match
    flash::FlashAttnBwdPreprocess), a tail that changes between compiles matched by its form."""
    for tail, rx in _TAILS:
        m = tail.search(token)
        if m is not None and m.start(1) >= MIN_TOKEN:
            core = token[:m.start(1)]
            return _WHOLE_START + re.escape(core) + rx + _WHOLE_END, core
    return _WHOLE_START + re.escape(token) + _WHOLE_END, token


def suggest_pattern(name: str, others: list[str], unknown: frozenset[str] | set[str] = frozenset()
                    ) -> tuple[str | None, str]:
    """(pattern, why) for a [[family]] row matching ``name``: the most distinctive token of the name
    that matches none of ``others`` (the trace's kernel names outside the unknown set), preferring
    tokens that say attention, then those that match fewest names of the trace (``others`` and
    ``unknown``), then the first in the name; else the name itself. None when no pattern from the
    name leaves every name of ``others`` alone."""
    seen: set[str] = set()
    best = None
    for pos, m in enumerate(_QUALIFIED.finditer(name)):
        tok = m.group(0)
        if m.end() > MAX_TEXT:
            break  # the row's example keeps the name's first MAX_TEXT characters: its pattern must match them
        if tok in seen or len(tok) < MIN_TOKEN or _is_generic(tok):
            continue
        seen.add(tok)
        pattern, core = _token_pattern(tok)
        rx = compile_linear(pattern)
        if not rx.search(name) or any(core in o and rx.search(o) for o in others):
            continue  # claims a kernel outside the unknown set
        reach = sum(1 for u in unknown if core in u and rx.search(u))
        key = (not looks_like_attention(tok), reach, pos)
        if best is None or key < best[0]:
            best = (key, pattern, reach, core)
    if best is not None:
        _, pattern, reach, tok = best
        return pattern, (f"token {tok!r}: matches {reach or 1} unknown kernel name"
                                     f"{'s' if reach > 1 else ''} of this trace and none of its "
                                     f"{len(others)} other kernel names")
    exact = "^" + re.escape(name) + "$"
    if len(exact) <= MAX_PATTERN:
        return exact, "the whole name: no token of it is distinctive enough on this trace"
    prefix = "^" + re.escape(name[:MAX_PATTERN // 2])
    rx = compile_linear(prefix)
    if len(prefix) <= MAX_PATTERN and not any(rx.search(o) for o in others):
        return prefix, "the start of the name: no token of it is distinctive enough on this trace"
    return None, "no pattern taken from this name leaves the trace's other kernels alone; write one by hand"


class Outside(msgspec.Struct):
    """The kernels in no attention call, by what they are: named like attention but unknown, known
    attention sub-stages (HELPER_STAGES) that joined no call, and the rest (not attention)."""

    unknown: dict[str, list[float]] = msgspec.field(default_factory=dict)  # name -> [count, gpu µs]
    unjoined: dict[str, list[float]] = msgspec.field(default_factory=dict)  # name -> [count, gpu µs]
    not_attention_us: float = 0.0


def outside_calls(L: Linked, call_of: list[int], kernel_call: list[int]) -> Outside:
    """Every kernel outside the attention calls, sorted into Outside's three kinds."""
    out = Outside()
    kind_of: dict[str, dict[str, list[float]] | None] = {}  # few names, many kernels
    for k in L.kernels:
        name = k.name
        if k.op >= 0 and call_of[k.op] >= 0 or kernel_call[k.i] >= 0:
            continue
        if name in kind_of:
            acc = kind_of[name]
        else:
            fam = P.kernel_family(name)
            if fam is not None and fam.stage in P.HELPER_STAGES:
                acc = out.unjoined  # known attention work that no call took: never silently dropped
            elif looks_like_attention(name) and (fam is None or fam.stage in P.CONTEXT_STAGES):
                acc = out.unknown  # exclusions are known not to be attention, fused families are calls
            else:
                acc = None
            kind_of[name] = acc
        if acc is None:
            out.not_attention_us += k.dur
            continue
        row = acc.get(name)
        if row is None:
            row = acc[name] = [0, 0.0]
        row[0] += 1
        row[1] += k.dur
    return out


def _share(us: float, total_gpu_us: float) -> float:
    return round(us / total_gpu_us, 6) if total_gpu_us > 0 else 0.0


def unknown_kernels(L: Linked, call_of: list[int], kernel_call: list[int], total_gpu_us: float,
                    outside: Outside | None = None) -> list[dict[str, Any]]:
    """Attention-looking kernels outside every call whose family is not an attention family."""
    acc = (outside or outside_calls(L, call_of, kernel_call)).unknown
    out = []
    unknown = frozenset(acc)
    # Every other kernel name of the trace, those in calls too: a suggested row must leave them alone.
    others = sorted({k.name for k in L.kernels} - unknown) if acc else []
    for name, (n, us) in sorted(acc.items(), key=lambda kv: -kv[1][1])[:MAX_ROWS]:
        stage, ps = _suggested_stage(name)
        pattern, why = suggest_pattern(name, others, unknown)
        out.append({"name": name, "count": int(n), "gpu_us": round(us, 3), "share": _share(us, total_gpu_us),
                    "toml": toml_row(name, _row_name(name), stage, ps, pattern) if pattern else "",
                    "pattern": pattern, "pattern_why": why})
    return out


def unjoined_kernels(outside: Outside, total_gpu_us: float) -> list[dict[str, Any]]:
    """Known attention sub-stage kernels (preprocess, postprocess, reduce, quantize, KV-cache write)
    that joined no call, largest first: their time is in no call's, so it is reported here."""
    out = []
    for name, (n, us) in sorted(outside.unjoined.items(), key=lambda kv: -kv[1][1])[:MAX_ROWS]:
        fam = P.kernel_family(name)
        out.append({"name": name, "family": fam.family if fam else "", "stage": fam.stage if fam else "",
                    "pass": (fam.pass_ if fam else "") or "fwd", "count": int(n), "gpu_us": round(us, 3),
                    "share": _share(us, total_gpu_us)})
    return out


def accounting(outside: Outside, attention_gpu_us: float, total_gpu_us: float) -> dict[str, Any]:
    """Where the trace's GPU kernel time went, in four parts that add up to its total (µs): attention
    calls, kernels known not to be attention, attention sub-stage kernels in no call, and kernels
    named like attention that nothing explains; accounted_share is the first two over the total."""
    unjoined = sum(us for _, us in outside.unjoined.values())
    unknown = sum(us for _, us in outside.unknown.values())
    known = attention_gpu_us + outside.not_attention_us
    return {"total_us": round(total_gpu_us, 3), "attention_calls_us": round(attention_gpu_us, 3),
            "not_attention_us": round(outside.not_attention_us, 3), "unjoined_helpers_us": round(unjoined, 3),
            "unknown_us": round(unknown, 3),
            "accounted_share": round(known / total_gpu_us, 6) if total_gpu_us > 0 else None}


def unclaimed_score_paths(L: Linked, call_of: list[int], kernel_call: list[int]) -> str | None:
    """A warning when softmax kernels (of the family table, or named softmax: net_class) sit between
    batched GEMMs on a stream (kernel_path.py) and no attention call claims them: attention the ops
    and the kernel table did not reveal (custom op names, an unknown softmax kernel)."""
    if not L.kernels:
        return None
    op = np.asarray(L.kernel_op, np.int64)
    in_call = np.append(np.asarray(call_of, np.int64), -1)[op] >= 0  # op -1 reads the appended -1
    claimed = in_call | (np.asarray(kernel_call, np.int64) >= 0)
    if L.before_window is not None:
        claimed |= L.before_window.kernels  # from before the window: listed apart (report.before_window)
    found = kernel_path.find(L, claimed, only_unlaunched=False, classify=net_class)
    if not found:
        return None
    soft = [i for c in found for i, (st, _) in zip(c.kernels, c.stages) if st == "softmax"]
    us = sum(L.kernels[i].dur for i in soft)
    unknown = sorted({L.kernels[i].name for i in soft if P.kernel_family(L.kernels[i].name) is None})
    line = (f"{len(soft)} softmax kernel{'s sit' if len(soft) > 1 else ' sits'} between batched GEMMs on a GPU stream "
            f"({us:.1f} µs) and no attention call claims {'them' if len(soft) > 1 else 'it'}: attention whose ops "
            f"the engine did not recognise? first: {L.kernels[soft[0]].name[:100]!r}")
    if unknown:
        line += (f"; {len(unknown)} of their names match no kernel family (first {unknown[0][:100]!r}): a [[family]] "
                 "row with stage softmax (--patterns FILE) lets the kernel path find such calls")
    return line


def unjoined_warning(rows: list[dict[str, Any]]) -> str | None:
    if not rows:
        return None
    share = sum(r["share"] for r in rows)
    stages = sorted({r["stage"] for r in rows})
    return (f"{len(rows)} attention sub-stage kernel name{'s' if len(rows) > 1 else ''} ({', '.join(stages)}) "
            f"joined no attention call ({share:.1%} of GPU time, not in attention time): {rows[0]['name'][:100]!r}"
            f"{' and more' if len(rows) > 1 else ''}; listed in unjoined_kernels (its attention kernel may be "
            "unknown: see unknown_kernels)")


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


def section(L: Linked, call_of: list[int], m, warnings: list[str]) -> dict[str, Any]:
    """The report's safety net: attention-looking kernels that nothing explains, the sub-stage kernels
    that joined no call, the GPU time's accounting, and the kernel table used; its warnings go to
    ``warnings``."""
    outside = outside_calls(L, call_of, m.kernel_call)
    rows = unknown_kernels(L, call_of, m.kernel_call, m.total_gpu_us, outside)
    unjoined = unjoined_kernels(outside, m.total_gpu_us)
    # Attention time as the calls' cells hold it (unrounded), so the four parts add up to the total.
    att_gpu = sum(x.gpu_us for cells in m.cells for x in cells.values())
    part = {"unknown_kernels": rows, "unjoined_kernels": unjoined,
            "gpu_accounting": accounting(outside, att_gpu, m.total_gpu_us) if L.kernels else None}
    for line in (warning_line(rows), unjoined_warning(unjoined), unclaimed_score_paths(L, call_of, m.kernel_call)):
        if line:
            warnings.append(line)
    part["kernel_table"] = {"families": len(P.effective_families()), "user_families": len(P.user_families()),
                            "user_sources": [os.path.basename(f) for f in installed_files()]}
    return part
