"""The /compare answer: the named runs' reports side by side (report/compare.py), or which are still loading."""

from __future__ import annotations

from typing import Any

import msgspec

from ..report.compare import compare_reports
from ..report.layers import decode_report
from .index import ERROR, LOADING, NOT_A_TRACE, RunIndex, unreadable


def answer(index: RunIndex, names: list[str], workers: list[str | None]) -> tuple[int, Any]:
    """(HTTP status, body) for runs ``names`` (one worker each, or None: its first): 200 with the comparison,
    202 while any is analysed. Raises UnknownName for a run the index does not know (404), ValueError
    with the message for runs that cannot be compared (422)."""
    entries = [index.lookup(name, worker) for name, worker in zip(names, workers)]
    failed = [e for e in entries if e.status == ERROR]
    if failed:
        raise ValueError("cannot compare: " + "; ".join(e.message or e.display for e in failed))
    snaps = [e for e in entries if e.is_snapshot]
    if snaps:
        raise ValueError("cannot compare: " + "; ".join(NOT_A_TRACE.format(e.display) for e in snaps))
    loading = [e for e in entries if e.status == LOADING]
    for e in loading:
        index.want(e)
    reports = []
    for e in [] if loading else entries:
        body = _report_bytes(index, e)
        if body is None:  # its cache entry vanished: it is being analysed again
            loading = [e]
            break
        try:
            r = decode_report(body)  # its layers as the Structs compare reads
        except msgspec.DecodeError as exc:  # a damaged cache entry (or not an object)
            raise ValueError(unreadable(e.display, exc)) from None
        reports.append((e.run if workers[0] is None else _rank_label(e, r), r))
    if loading:
        return 202, {"status": "loading", "waiting_for": [e.run for e in loading]}
    if len({label for label, _ in reports}) < len(reports):  # two traces claim one rank
        reports = [(f"{e.run}/{e.worker}", r) for e, (_, r) in zip(entries, reports)]
    return 200, compare_reports(reports)


def _report_bytes(index: RunIndex, e) -> bytes | None:
    """As every route reads a report: its status may have changed since the checks above."""
    if e.status == ERROR:
        raise ValueError(e.message or f"{e.display}: cannot be analysed")
    if e.status == LOADING:
        index.want(e)
        return None
    return index.report_bytes(e)


def _rank_label(e, report) -> str:
    """How a rank against rank comparison names a side: "job rank 5" when the trace says its rank
    (ranks/identify.py), else run/worker."""
    from ..ranks.identify import rank_of

    got = rank_of(report)
    return f"{e.run} rank {got[0]}" if got is not None else f"{e.run}/{e.worker}"
