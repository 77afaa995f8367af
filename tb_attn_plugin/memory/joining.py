"""Which snapshot files join which trace: one rule for the analysis and for the plugin's listing
(kept free of the engine's imports, since the TensorBoard process reads it)."""

from __future__ import annotations

import re

SNAPSHOT_SUFFIX = ".memory.pickle"  # how the collector names a snapshot: {worker}.{time}.memory.pickle


def is_snapshot_path(path: str) -> bool:
    return str(path).endswith((".pickle", ".pickle.gz"))


def joining_names(trace_name: str, names: list[str]) -> list[str]:
    """Which of ``names`` (a directory's files) join the trace ``trace_name`` there (see joins_by_trace)."""
    return joins_by_trace([trace_name], names)[trace_name]


def joins_by_trace(trace_names: list[str], names: list[str]) -> dict[str, list[str]]:
    """For each of ``trace_names``, which of ``names`` (its directory's files) join it: the snapshot
    named after it, else, when the directory holds only this trace, every ``*.pickle`` in it. One
    rule for the analysis and for the plugin's listing, which re-analyses a trace when these change;
    the directory is read once for all its traces (a run of 1,024 ranks lists in linear time)."""
    present = set(names)
    pickles = sorted(n for n in names if n.endswith(".pickle"))
    alone = len([n for n in names if ".pt.trace.json" in n or n.endswith((".json", ".json.gz"))]) == 1
    out = {}
    for trace_name in trace_names:
        stem = trace_name.split(".pt.trace.json")[0] if ".pt.trace.json" in trace_name else trace_name.rsplit(".json", 1)[0]
        own = stem + SNAPSHOT_SUFFIX
        out[trace_name] = [own] if own in present else (pickles if alone else [])
    return out


_SNAPSHOT_NAME = re.compile(r"^(?P<worker>.+?)(?:\.(?P<span>\d+))?(?:\.memory)?\.pickle(?:\.gz)?$")


def snapshot_name(name: str) -> tuple[str, str] | None:
    """(worker, span) of a snapshot listed on its own (a directory without traces), or None when
    ``name`` is not a snapshot: ``host_1.1733.memory.pickle`` -> ("host_1", "1733"), and a name
    of one's own, ``snapshot.pickle`` -> ("snapshot", "")."""
    m = _SNAPSHOT_NAME.match(name)
    return (m.group("worker"), m.group("span") or "") if m else None
