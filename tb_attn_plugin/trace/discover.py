"""Finding traces the way ``torch.profiler.tensorboard_trace_handler`` lays them out.

A run is a directory holding ``{worker}.{time_ns}.pt.trace.json[.gz]`` files; each worker (host,
pid or rank) may write several files, one per profiling span, ordered by their time stamp. Any
other ``{name}.pt.trace.json[.gz]`` (``bert.pt.trace.json.gz``, as torch-tb-profiler reads it) is a
trace too: worker ``{name}``, no span.
"""

from __future__ import annotations

import os
import re

import msgspec

TRACE_FILE = re.compile(r"^(?P<worker>.+?)\.(?P<span>\d+)\.pt\.trace\.json(\.gz)?\Z")
PT_TRACE = re.compile(r"^(?P<stem>.+?)\.pt\.trace\.json(\.gz)?\Z")
ANY_TRACE = re.compile(r"\.(pt\.trace\.)?json(\.gz)?$")


class TraceFile(msgspec.Struct, frozen=True):
    path: str
    run: str  # directory relative to the root ("." for the root itself)
    worker: str
    span: str  # the time stamp in the file name, or the file name when it has none


# The longest run, worker or span name listed: Linux's PATH_MAX, beyond which no path can be opened.
# The plugin accepts parameters up to this length, so every run it lists can be asked for.
MAX_NAME = 4096


def parse_name(filename: str) -> tuple[str, str] | None:
    """(worker, span) of a trace_handler file name, or None when it is not one."""
    m = TRACE_FILE.match(filename)
    if m:
        return m.group("worker"), m.group("span")
    return None


def trace_name(filename: str) -> tuple[str, str] | None:
    """(worker, span) of any ``*.pt.trace.json[.gz]`` file: a trace_handler name as parse_name reads
    it, else (the name before ``.pt.trace.json``, "") — the name says no span; None for other files."""
    parsed = parse_name(filename)
    if parsed is not None:
        return parsed
    m = PT_TRACE.match(filename)
    return (m.group("stem"), "") if m else None


def find_traces(root: str, *, loose: bool = False) -> list[TraceFile]:
    """Every trace under ``root``. With ``loose``, any ``*.json``/``*.json.gz`` counts too (CLI use);
    the plugin stays strict so that unrelated JSON in a logdir is never parsed. Paths are joined onto
    ``root`` as given: a relative directory gives relative paths, so reports and errors name the files
    as the user named them, never the machine's absolute path."""
    found: list[TraceFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        run = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            parsed = parse_name(name)
            if parsed is None:
                if not (loose and ANY_TRACE.search(name)):
                    continue
                parsed = (re.sub(r"\.(pt\.trace\.)?json(\.gz)?$", "", name), name)
            found.append(TraceFile(os.path.join(dirpath, name), run, parsed[0], parsed[1]))
    found.sort(key=lambda t: (t.run, t.worker, _span_key(t.span)))
    return found


def _span_key(span: str):
    return (0, int(span), "") if span.isdigit() else (1, 0, span)
