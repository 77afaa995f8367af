"""The report's ``memory`` section from a Timeline and its Attribution: peak and what is live then,
per call, layer and stage, score-matrix blocks, churn and a downsampled curve."""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable

import msgspec
import numpy as np

from ..text.units import bytes_text, duration_text
from ..table import columns
from ..table.arrays import intern, ints
from .attribute import Attribution
from .timeline import Timeline, downsample

SECTION_VERSION = 1
MAX_CURVE_POINTS = 3000
MAX_CALL_ROWS = 2000
MAX_SPANS = 3000
MAX_LIVE_ROWS = 12
CUDA_BLOCK = 512  # the caching allocator rounds every block up to a multiple of 512 bytes
# A large block the caching allocator does not split keeps up to this much more than was asked: it
# splits a large block only when more than kSmallSize (1 MiB) would remain (pytorch/pytorch
# c10/cuda/CUDACachingAllocator.cpp, should_split); a fresh segment of 10 MiB or more is rounded up to
# 2 MiB (kRoundLarge). Seen: TimeSformer's 1,889,427,648-byte score matrix recorded as a
# 1,889,533,952-byte block (901 x 2 MiB; TraceLens h100 timesformer trace, tests/fixtures/public).
UNSPLIT_EXTRA = 1 << 20
_INT64_MAX = (1 << 63) - 1
UNKNOWN = "attention: unknown (this snapshot has no annotations and no attention frames)"


class CallInfo(msgspec.Struct):
    """What the section needs to know of one attention call."""

    layer: str
    step: int = -1
    score_bytes: int | None = None  # B·H·Lq·Lk·itemsize from its shapes
    spans: list[tuple[str, str, float, float]] = msgspec.field(default_factory=list)  # (stage, pass, start, end)


def is_score_block(size: int, score: int | None) -> bool:
    return bool(score) and (size == score or size == -(-score // CUDA_BLOCK) * CUDA_BLOCK)


# The stages whose ops make the score matrix or its gradient: QKᵀ, scale and mask, softmax, dropout in
# forward; the softmax's, mask's and dropout's backward (QKᵀ's backward makes dQ and dK, not scores).
SCORE_PATH = frozenset({("qk_matmul", "fwd"), ("scale_mask", "fwd"), ("softmax", "fwd"), ("dropout", "fwd"),
                        ("scale_mask", "bwd"), ("softmax", "bwd"), ("dropout", "bwd")})


# Ops that copy an input (matmul's contiguous copy of Q or of an expanded K): what they allocate under
# a score-path op is that input's copy, not a score.
INPUT_COPY_OPS = frozenset({"aten::clone", "aten::contiguous", "aten::copy_", "aten::_to_copy", "aten::to",
                            "aten::expand", "aten::repeat", "aten::repeat_interleave"})


def score_path_events(delta, att: Attribution, calls: list[CallInfo], L=None) -> bytearray:
    """Per event, 1 for a score-matrix block: an allocation made by a score-path op (SCORE_PATH) of
    its call's B·H·Lq·Lk·itemsize (as the allocator rounds it: CUDA_BLOCK, UNSPLIT_EXTRA), not by a copy of its input (``L``: the linked trace, whose ops
    say which op made each allocation, att.op). A block of that size made elsewhere (Q, K, V and
    outputs when L = D) is none."""
    out = bytearray(len(delta))
    if not len(delta) or not att.slots:
        return out
    k = ints(att.slot)
    on_path = np.array([(s.stage, s.pass_) in SCORE_PATH for s in att.slots] + [False], bool)[k]
    at = np.flatnonzero(on_path & (k >= 0))
    if not len(at):
        return out
    d = ints(delta)[at]
    call = np.fromiter((s.call for s in att.slots), np.int64, len(att.slots))[k[at]]
    exact, rounded = _scores(calls)
    r = rounded[call]
    unsplit = (r > UNSPLIT_EXTRA) & (d > r) & (d <= r + UNSPLIT_EXTRA)  # a large block not split (UNSPLIT_EXTRA)
    hit = at[(d > 0) & ((d == exact[call]) | (d == r) | unsplit)]
    if L is not None and att.op is not None:
        hit = [i for i in hit.tolist() if not _under_input_copy(L, int(att.op[i]))]
    got = np.zeros(len(delta), np.uint8)
    got[hit] = 1
    return bytearray(got.tobytes())


gib = bytes_text  # the one byte formatter (text/units.py); the name memory/ has always used


def build(tl: Timeline, att: Attribution, calls: list[CallInfo], *, source: str,
          churn: dict[str, Any] | None = None, frame_of: Callable[[int], str | None] | None = None,
          time_basis: str = "us", devices: list[dict[str, Any]] | None = None,
          score_events: bytearray | None = None, stack_of: Callable[[int], list[str] | None] | None = None,
          attention_known: bool = True) -> dict[str, Any]:
    """``score_events``: per event, 1 for a score-matrix block, where the ops that made the blocks are
    known (snapshot frames); else a block of its call's B·H·Lq·Lk·itemsize is one. ``stack_of``: an
    event's matched frames (C++ ones included) for the peak's live rows; ``attention_known`` False:
    nothing could tell attention's blocks (the peak's share is null, never 0)."""
    n = len(tl)
    delta, live, slot = tl.delta, tl.live, att.slot

    # Per call / per (stage, pass) sums over the allocations inside attention calls; the counts over
    # every event in one pass (table/columns.py: at C speed, a big trace has millions).
    allocs, zeros, allocated_total, unpaired_frees, live_at_end, inside = columns.byte_counts(delta, tl.pair, slot)
    frees = n - allocs - zeros
    per_call, per_layer_stage, per_stage, is_score = _inside_sums(att, calls, delta, inside, score_events)

    call_rows = []
    for c, row in zip(calls, per_call):
        a, b = row.pop("first"), row.pop("last")
        growth = (max(live[a:b + 1]) - tl.live_before(a)) if a >= 0 else 0
        call_rows.append({"layer": c.layer, "step": c.step, "score_bytes": c.score_bytes,
                          "peak_growth_bytes": int(max(0, growth)), **row})

    layers: dict[str, dict[str, Any]] = {}
    for r in call_rows:
        lay = layers.get(r["layer"])
        if lay is None:
            lay = layers[r["layer"]] = {"layer": r["layer"], "calls": 0, "bytes_allocated": 0, "allocs": 0,
                                        "peak_growth_bytes": 0, "score_bytes": r["score_bytes"],
                                        "score_matrix_bytes_per_call": 0, "score_matrix_blocks": 0}
        lay["calls"] += 1
        lay["bytes_allocated"] += r["bytes_allocated"]
        lay["allocs"] += r["allocs"]
        lay["peak_growth_bytes"] = max(lay["peak_growth_bytes"], r["peak_growth_bytes"])
        lay["score_matrix_bytes_per_call"] = max(lay["score_matrix_bytes_per_call"], r["score_matrix_bytes"])
        lay["score_matrix_blocks"] += r["score_matrix_blocks"]
    for (layer, st, ps), (b, k, sb) in sorted(per_layer_stage.items(), key=lambda kv: -kv[1][0]):
        layers[layer].setdefault("stages", []).append({"stage": st, "pass": ps, "bytes_allocated": b, "allocs": k,
                                                       "score_matrix_blocks": sb})
    layer_rows = sorted(layers.values(), key=lambda r: -r["peak_growth_bytes"])

    stage_rows = [{"stage": st, "pass": ps, "bytes_allocated": v[0], "allocs": v[1], "score_matrix_blocks": v[2],
                   "score_matrix_bytes": v[3]} for (st, ps), v in sorted(per_stage.items(), key=lambda kv: -kv[1][0])]

    p = tl.peak_index()
    peak = _peak(tl, att, calls, p, is_score, frame_of, stack_of, attention_known) if p >= 0 else None
    t0 = tl.t[0] if n else 0.0
    times, values, idx = downsample(tl.t, live, MAX_CURVE_POINTS, keep=(p,) if p >= 0 else ())
    reserved = [int(tl.reserved[i]) for i in idx] if tl.reserved is not None and len(tl.reserved) == n else None
    # Sorted by start, only the first MAX_SPANS made into rows (a long snapshot has many calls).
    flat = [(ci, st, ps, s0, s1) for ci, c in enumerate(calls) for st, ps, s0, s1 in c.spans]
    raw = sorted(zip(columns.rounded([s0 - t0 for _, _, _, s0, _ in flat]), flat), key=itemgetter(0))[:MAX_SPANS]
    spans = [{"call": ci, "layer": calls[ci].layer, "stage": st, "pass": ps, "start_us": a0, "end_us": a1}
             for (a0, (ci, st, ps, _, _)), a1 in zip(raw, columns.rounded([s1 - t0 for _, (*_, s1) in raw]))]
    total_score = sum(r["score_matrix_bytes"] for r in call_rows)
    att_peak = attention_peak(tl, att) if calls and attention_known else None
    section: dict[str, Any] = {
        "version": SECTION_VERSION,
        "source": source,
        "device": tl.device,
        "devices": devices or [{"device": tl.device, "peak_bytes": int(max(live)) if n else 0, "events": n}],
        "time_basis": time_basis,
        "events": n,
        "peak_bytes": int(live[p]) if p >= 0 else 0,
        "peak": peak,
        "score_matrix": {"blocks": sum(r["score_matrix_blocks"] for r in call_rows), "bytes_total": total_score,
                         "bytes_per_call_max": max((r["score_matrix_bytes"] for r in call_rows), default=0)},
        "churn": {"allocs": allocs, "frees": frees, "bytes_allocated": allocated_total,
                  "unpaired_frees": unpaired_frees,
                  "live_at_end": live_at_end,
                  **(churn or {})},
        "curve": {"start_us": round(t0, 3), "t_us": columns.rounded([x - t0 for x in times]), "bytes": values,
                  "reserved": reserved, "points_total": n},
        "spans": spans[:MAX_SPANS],
        "calls": call_rows[:MAX_CALL_ROWS],
        "calls_omitted": max(0, len(call_rows) - MAX_CALL_ROWS),
        "layers": layer_rows,
        "stages": stage_rows,
    }
    if att_peak is not None:
        att_peak["t_us"] = round(att_peak["t_us"] - t0, 3)
        section["attention_peak"] = att_peak
        if peak is not None and not peak["attention_bytes"]:
            peak["explanation"] = explain(peak, att_peak)
    return section


def _scores(calls: list[CallInfo]) -> tuple[np.ndarray, np.ndarray]:
    """Per call, the block sizes that are its score matrix (is_score_block): B·H·Lq·Lk·itemsize and
    that rounded up to the allocator's block; -1 where there is none or it is past any int64 size."""
    exact, rounded = [], []
    for c in calls:
        sb = c.score_bytes
        if isinstance(sb, float):  # equal to an int size only when integral
            sb = int(sb) if sb.is_integer() else None
        ok = bool(sb) and 0 < sb <= _INT64_MAX
        exact.append(sb if ok else -1)
        up = -(-sb // CUDA_BLOCK) * CUDA_BLOCK if ok else -1
        rounded.append(up if up <= _INT64_MAX else -1)
    return np.array(exact, np.int64), np.array(rounded, np.int64)


def _under_input_copy(L, op: int) -> bool:
    """Whether op ``op`` or an op above it (up to the first op that decides a stage) copies an input."""
    while op >= 0:
        name = L.names[op]
        if name in INPUT_COPY_OPS:
            return True
        if not name.startswith("aten::") or name.startswith(("aten::matmul", "aten::bmm", "aten::einsum",
                                                               "aten::baddbmm", "aten::softmax", "aten::_softmax")):
            return False  # a module scope, or the score-path op itself: nothing above copies for it
        op = L.parent[op]
    return False


def _inside_sums(att: Attribution, calls: list[CallInfo], delta, inside: list[int],
                 score_events: bytearray | None):
    """Over the allocations inside attention calls (``inside``, ascending): per call its row's sums,
    per (layer, stage, pass) [bytes, allocs, score blocks], per (stage, pass) [bytes, allocs, score
    blocks, score bytes], each dict in order of its key's first allocation, and per event whether it
    is a score-matrix block. Summed at C speed (exact ints) per call and per key, each row made once."""
    slot, slots = att.slot, att.slots
    per_call = [{"bytes_allocated": 0, "allocs": 0, "score_matrix_bytes": 0, "score_matrix_blocks": 0,
                 "bwd_bytes_allocated": 0, "first": -1, "last": -1} for _ in calls]
    per_stage: dict[tuple[str, str], list[int]] = {}
    per_layer_stage: dict[tuple[str, str, str], list[int]] = {}
    is_score = bytearray(len(delta))
    if not inside:
        return per_call, per_layer_stage, per_stage, is_score
    at = np.asarray(inside, np.int64)
    d, k = ints(delta)[at], ints(slot)[at]
    call = np.fromiter((s.call for s in slots), np.int64, len(slots))[k]  # each allocation's call
    if score_events is not None:
        score = np.frombuffer(bytes(score_events), np.uint8)[at] != 0
    else:
        exact, rounded = _scores(calls)
        score = (d == exact[call]) | (d == rounded[call])
    is_score_at = np.zeros(len(delta), np.uint8)
    is_score_at[at[score]] = 1
    is_score[:] = is_score_at.tobytes()
    # Each allocation's (stage, pass), from its slot's.
    stage_pass = intern([(s.stage, s.pass_) for s in slots])
    sp = stage_pass.ids[k]
    bwd = np.array([ps == "bwd" for _, ps in stage_pass.values], bool)[sp]
    n_calls = len(calls)
    size, allocs = _exact_sums(call, d, n_calls), np.bincount(call, minlength=n_calls).tolist()
    bwd_size = _exact_sums(call[bwd], d[bwd], n_calls)
    score_size, blocks = _exact_sums(call[score], d[score], n_calls), np.bincount(call[score], minlength=n_calls).tolist()
    fwd = ~bwd
    first, last = np.full(n_calls, len(delta), np.int64), np.full(n_calls, -1, np.int64)
    np.minimum.at(first, call[fwd], at[fwd])
    np.maximum.at(last, call[fwd], at[fwd])
    first[last < 0] = -1
    for row, b, a, bb, sb, sc, f, la in zip(per_call, size, allocs, bwd_size, score_size, blocks, first.tolist(),
                                           last.tolist()):
        row.update(bytes_allocated=b, allocs=a, score_matrix_bytes=sb, score_matrix_blocks=sc, bwd_bytes_allocated=bb,
                   first=f, last=la)
    # Per (layer, stage, pass) and per (stage, pass), keys in order of first allocation.
    layer = intern([c.layer for c in calls])
    n_sp = len(stage_pass.values)
    for key, (b, a, sc, _) in _grouped(layer.ids[call] * n_sp + sp, d, score).items():
        lay, ps = divmod(key, n_sp)
        per_layer_stage[(layer.values[lay], *stage_pass.values[ps])] = [b, a, sc]
    for key, got in _grouped(sp, d, score).items():
        per_stage[stage_pass.values[key]] = got
    return per_call, per_layer_stage, per_stage, is_score


def _may_pass_int64(values: np.ndarray) -> bool:
    """Whether a sum of some of these ints could pass int64 (then they are summed as Python's ints)."""
    return bool(len(values)) and max(int(values.max()), -int(values.min())) > _INT64_MAX // len(values)


def _exact_cumsum(values: np.ndarray) -> np.ndarray:
    """The running sum of int values, exact: int64 where no partial sum can pass it, else Python's ints."""
    return np.cumsum(values.astype(object) if _may_pass_int64(values) else values)


def _grouped(key: np.ndarray, size: np.ndarray, score: np.ndarray) -> dict[int, list[int]]:
    """Per key (keys in order of first appearance): [bytes, allocations, score blocks, score bytes]."""
    gid, keys = columns.factorize(range(len(key)), (key,))
    g = len(keys)
    b, s = _exact_sums(gid, size, g), _exact_sums(gid[score], size[score], g)
    a, sc = np.bincount(gid, minlength=g).tolist(), np.bincount(gid[score], minlength=g).tolist()
    return {kk: [b[i], a[i], sc[i], s[i]] for i, kk in enumerate(keys)}


def _exact_sums(group: np.ndarray, values: np.ndarray, groups: int) -> list[int]:
    """Per group, the sum of its int values as a Python int: int64 where no sum can pass it, else
    Python's ints."""
    if _may_pass_int64(values):
        out = np.zeros(groups, object)
        np.add.at(out, group, values.astype(object))
        return [int(v) for v in out]
    out = np.zeros(groups, np.int64)
    np.add.at(out, group, values)
    return out.tolist()


def attention_peak(tl: Timeline, att: Attribution) -> dict[str, Any] | None:
    """The moment attention's own live blocks were largest: {bytes, t_us, live_bytes (everything
    live then), share}; the device's peak may come when attention's blocks are already freed."""
    slot, pair, delta, live = att.slot, tl.pair, tl.delta, tl.live
    d = ints(delta)
    # An allocation counts when it is attention's, a free when the allocation it frees is: the
    # running sum over those events, and its first greatest value above 0.
    j = np.where(d > 0, np.arange(len(d)), ints(pair))
    counted = np.flatnonzero(j >= 0)
    counted = counted[ints(slot)[j[counted]] >= 0]
    cur = _exact_cumsum(d[counted])
    at, best = -1, 0
    if len(cur):
        k = int(np.argmax(cur))
        if cur[k] > 0:
            at, best = int(counted[k]), int(cur[k])
    if at < 0:
        return None
    total = int(live[at])
    return {"bytes": int(best), "t_us": float(tl.t[at]), "live_bytes": total,
            "share": round(best / total, 4) if total > 0 else None}


def _peak(tl: Timeline, att: Attribution, calls: list[CallInfo], p: int, is_score: bytearray,
          frame_of, stack_of=None, attention_known: bool = True) -> dict[str, Any]:
    k = att.slot[p]
    where = att.slots[k] if k >= 0 else None
    live_ix = tl.live_at(p)
    groups: dict[tuple, list[int]] = {}
    att_bytes = score_bytes = 0
    for j in live_ix:
        kk = att.slot[j]
        size = tl.delta[j]
        score = bool(is_score[j])
        if kk >= 0:
            att_bytes += size
            if score:
                score_bytes += size
        s = att.slots[kk] if kk >= 0 else None
        key = (calls[s.call].layer if s else None, s.stage if s else None, s.pass_ if s else None, score)
        g = groups.setdefault(key, [0, 0, j])
        g[0] += size
        g[1] += 1
        if size > tl.delta[g[2]]:
            g[2] = j
    rows = []
    for (layer, stage, ps, sc), (b, cnt, biggest) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:MAX_LIVE_ROWS]:
        rows.append({"layer": layer, "stage": stage, "pass": ps, "score_matrix": sc, "bytes": int(b), "blocks": cnt,
                     "largest_block": int(tl.delta[biggest]), "frame": frame_of(biggest) if frame_of else None})
        if stack_of is not None:
            rows[-1]["stack"] = stack_of(biggest)
    peak_bytes = int(tl.live[p])
    seen = sum(tl.delta[j] for j in live_ix)
    reserved = int(tl.reserved[p]) if tl.reserved is not None and len(tl.reserved) == len(tl) else None
    out = {
        "bytes": peak_bytes,
        "t_us": round(tl.t[p] - tl.t[0], 3),
        "layer": calls[where.call].layer if where else None,
        "step": calls[where.call].step if where else None,
        "stage": where.stage if where else None,
        "pass": where.pass_ if where else None,
        "attention_bytes": int(att_bytes) if attention_known else None,
        "attention_share": (round(att_bytes / peak_bytes, 4) if peak_bytes > 0 else 0.0) if attention_known else None,
        "score_matrix_bytes": int(score_bytes),
        "before_record_bytes": int(max(0, peak_bytes - seen)),  # live before the first event (unseen allocations)
        "reserved_bytes": reserved,
        "reserved_minus_allocated": (reserved - peak_bytes) if reserved else None,
        "live": rows,
    }
    out["explanation"] = explain(out)
    return out


def explain(peak: dict[str, Any], att_peak: dict[str, Any] | None = None) -> str:
    """One sentence: where the peak is and what is live then (``att_peak``: attention's own peak, said
    when attention holds nothing at the device's peak, so that 0% is never the whole story)."""
    total = gib(peak["bytes"])
    if not peak.get("layer"):
        where = "outside attention"
    else:
        pass_ = " (backward)" if peak.get("pass") == "bwd" else ""
        stage = peak.get("stage")
        # "other" and "call": inside the call's window but in none of its named stages
        where = (f"in the {stage} of {peak['layer']}{pass_}" if stage not in (None, "other", "call")
                 else f"in {peak['layer']}{pass_}, outside its named stages")
    parts = []
    score_rows = [r for r in peak["live"] if r["score_matrix"]]
    if score_rows:
        blocks = sum(r["blocks"] for r in score_rows)
        size = score_rows[0]["largest_block"]
        parts.append(f"{blocks} score-matrix block{'s' if blocks != 1 else ''} of {gib(size)} "
                     f"({gib(peak['score_matrix_bytes'])}) {'are' if blocks != 1 else 'is'} live")
    if peak.get("attention_share") is None:
        parts.append(UNKNOWN)
    else:
        parts.append(f"attention holds {peak['attention_share']:.0%} of it")
        if att_peak and not peak["attention_bytes"]:
            share = f", {att_peak['share']:.0%} of what was live then" if att_peak.get("share") is not None else ""
            parts[-1] += (f" (its blocks are freed by then; attention's own peak was {gib(att_peak['bytes'])} at "
                          f"{duration_text(att_peak['t_us'])}{share})")
    return f"peak {total} {where}: " + ", ".join(parts)
