"""Each attention call's serving phase (prefill, decode, mixed, unknown) from evidence in the trace:
its kernels' and ops' names (phase_rules.py), the query lengths its ops record (phase_rules.QUERY_ARGS:
vLLM's tokens, sequences and longest query) and its query length (1 with a longer key = decode)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Any

from . import phase_rules as R

PHASES = ("prefill", "decode", "mixed", "unknown")


def _from_shape(shape: dict | None, op_says_shape: bool) -> str | None:
    """Query length 1 with more than one key (a batch known, so the length is per sequence) = decode;
    for an op that runs either phase (rule "shape"), a longer query = prefill."""
    if not isinstance(shape, dict) or not isinstance(shape.get("batch"), int):
        return None
    lq, lk = shape.get("q_len"), shape.get("k_len")
    if lq == 1 and isinstance(lk, int) and lk > 1:
        return "decode"
    if op_says_shape and isinstance(lq, int) and lq > 1:
        return "prefill"
    return None


def as_int(v) -> int | None:
    """A Concrete Inputs value as an int (the profiler writes scalars as text: "1", "128")."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def _query_lengths(L, i: int) -> tuple[int, int | None, int | None] | None:
    """(query tokens T, sequences N, longest query M) of op i from its recorded inputs (QUERY_ARGS);
    None where its query's dims were not recorded."""
    row = R.query_args_for(L.names[i])
    got = L.args(i) if row else None
    dims = got.dims if got is not None else None
    if not isinstance(dims, list) or len(dims) <= row.q:
        return None
    q = dims[row.q]
    if not isinstance(q, list) or len(q) not in (2, 3) or not isinstance(q[0], int) or q[0] < 1:
        return None
    n = m = None
    if row.cu_seqlens_q is not None and len(dims) > row.cu_seqlens_q:
        cu = dims[row.cu_seqlens_q]
        if isinstance(cu, list) and len(cu) == 1 and isinstance(cu[0], int) and cu[0] >= 2:
            n = cu[0] - 1
    if row.max_seqlen_q is not None:
        conc = got.concrete
        if isinstance(conc, list) and len(conc) > row.max_seqlen_q:
            m = as_int(conc[row.max_seqlen_q])
    return q[0], n, m


def _from_query_lengths(t: int, n: int | None, m: int | None) -> tuple[str, str] | None:
    """The phase T query tokens over N sequences, the longest M, prove (1 token per sequence = decode):
    T = 1 or M = 1: decode; M > 1 and T > 1 + (N-1)M: no sequence can have 1 token: prefill;
    M > 1 and T - M < 2(N-1): some sequence has 1 token beside the longest: mixed; else nothing."""
    if t == 1 or m == 1:
        return "decode", f"query tokens {t}" + (f", longest query {m}" if m else "")
    if m is None or n is None or m < 1 or t < m or t < n:
        return None
    said = f"{t} query tokens over {n} sequences, longest {m}"
    if t > 1 + (n - 1) * m:
        return "prefill", said
    if t - m < 2 * (n - 1):
        return "mixed", said
    return None


def _kernel_evidence(names: frozenset) -> tuple[Counter, list[str]]:
    said: Counter = Counter()
    why: list[str] = []
    for nm in sorted(names):
        for r in R.rules_for("kernel", nm)[:1]:
            said[r.phase] += 1
            if len(why) < 3:
                why.append(f"kernel {nm[:80]} ({r.phase})")
    return said, why


def phase_of_calls(L, calls, m) -> dict[int, tuple[str, list[str]]]:
    """call id -> (phase, the evidence: one short line per rule that fired)."""
    op_hits = L.where_name(R.is_phase_op) if len(L.names) else []
    query_hits = L.where_name(R.is_query_op) if len(L.names) else []
    # The kernel names that say a phase, found once among the trace's distinct names: most traces
    # (training, encoders) have none, and then no call's kernels need a look.
    saying = {v for v in L.kernel_names.values if R.rules_for("kernel", v)} if L.kernels else set()
    out: dict[int, tuple[str, list[str]]] = {}
    by_kernels: dict[frozenset, tuple[Counter, list[str]]] = {}  # calls of one layer share their kernel names
    for c in calls:
        if saying:
            names = frozenset(k[0] for k in m.call_kernels[c.id] if k[0] in saying) | \
                frozenset(k.name for k in c.kernels if k.name in saying)
            got = by_kernels.get(names)
            if got is None:
                got = by_kernels[names] = _kernel_evidence(names)
            said, why = Counter(got[0]), list(got[1])
        else:
            said, why = Counter(), []
        shape_op = False
        k = bisect_left(op_hits, c.lo)
        while k < len(op_hits) and op_hits[k] < c.hi:
            nm = L.names[op_hits[k]]
            k += 1
            for r in R.rules_for("op", nm)[:1]:
                if r.phase == "shape":
                    shape_op = True
                    continue
                said[r.phase] += 1
                if len(why) < 3:
                    why.append(f"op {nm[:80]} ({r.phase})")
        by_query = None
        k = bisect_left(query_hits, c.lo)
        while k < len(query_hits) and query_hits[k] < c.hi:
            got = _query_lengths(L, query_hits[k])
            got = _from_query_lengths(*got) if got else None
            if got and (by_query is None or by_query[0] == "decode" and got[0] != "decode"):
                by_query = (got[0], f"op {L.names[query_hits[k]][:60]}: {got[1]} ({got[0]})")
            k += 1
        by_shape = _from_shape(c.info.get("shape"), shape_op)
        if by_query:
            said[by_query[0]] += 1
            why.append(by_query[1])
        elif by_shape:
            said[by_shape] += 1
            why.append(f"query length {c.info['shape'].get('q_len')} ({by_shape})")
        if said["mixed"] or (said["prefill"] and said["decode"]):
            phase = "mixed"
        elif said["prefill"]:
            phase = "prefill"
        elif said["decode"]:
            phase = "decode"
        else:
            phase = "unknown"
        out[c.id] = (phase, why)
    return out


def summary(calls, m, phase_of: dict[int, tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """PhaseRow (format/report/overview.py) per phase seen: calls, their GPU and CPU time, an example of evidence."""
    acc: dict[str, list] = {}
    for c in calls:
        ph, why = phase_of[c.id]
        row = acc.setdefault(ph, [0, 0.0, 0.0, why[:1]])
        row[0] += 1
        for x in m.cells[c.id].values():
            row[1] += x.gpu_us
            row[2] += x.cpu_us
    return [{"phase": ph, "calls": acc[ph][0], "gpu_us": round(acc[ph][1], 3), "cpu_us": round(acc[ph][2], 3),
             "evidence": acc[ph][3] if ph != "unknown" else ["no kernel, op or query length in the trace says"]}
            for ph in PHASES if ph in acc]
