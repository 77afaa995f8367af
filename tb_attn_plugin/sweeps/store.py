"""``sweep.jsonl``: one JSON object per finished cell, appended as each finishes (no torch).

Appending line by line is what makes Ctrl-C safe and reruns resumable: a cell is either a whole
line or absent. Reading is defensive (the plugin reads files it did not write): lines that are not
JSON objects, are cut short or lack the identifying fields are skipped and counted.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from .grid import cell_key

FILENAME = "sweep.jsonl"
STATUSES = ("ok", "unsupported", "oom", "error")
MAX_BYTES = 64 * 1024 * 1024  # a sweep of 10,000 cells is a few MB; anything far bigger is not ours
REQUIRED = {"backend": str, "batch": int, "seq_len": int, "status": str}


def path_in(logdir: str) -> str:
    return os.path.join(logdir, FILENAME)


# Bounds of a cell a sweep can have written: sizes no tensor passes (shapes.MAX_DIM: 2^40), and times
# no timer gives (below a picosecond, above 11 days). A line outside them is skipped with its reason,
# so that no analysis divides, logs or converts a number that only an edited file holds.
MAX_SIZE = 1 << 40
SIZES = ("batch", "seq_len", "heads", "kv_heads", "head_dim")
TIMES = ("median_s", "iqr_s", "mean_s")
MIN_TIME_S, MAX_TIME_S = 1e-12, 1e6
KEY_FIELDS = ("backend", "batch", "seq_len", "heads", "kv_heads", "head_dim", "dtype", "causal", "pass", "device",
              "module")  # grid.cell_key's: each a JSON scalar, or the cell has no key


def problem(rec: Any) -> str | None:
    """Why a decoded line is no sweep cell, or None when it is one."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for k, t in REQUIRED.items():
        v = rec.get(k)
        if not isinstance(v, t) or isinstance(v, bool):
            return f"{k} is {_short(v)}, not a{'n' if t is int else ''} {t.__name__}"
    if rec["status"] not in STATUSES:
        return f"status {_short(rec['status'])} is none of {', '.join(STATUSES)}"
    for k in KEY_FIELDS:
        if isinstance(rec.get(k), (list, dict)):
            return f"{k} is a JSON {type(rec[k]).__name__}, not a value"
    for k in SIZES:
        v = rec.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 < v < MAX_SIZE):
            return f"{k} {_short(v)} is no tensor size (an integer from 1 to 2^40)"
    for k in TIMES:  # a time that is no number is read as unknown (the plugin serves it as null)
        v = rec.get(k)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        if not (v == 0 and k == "iqr_s" or MIN_TIME_S <= v <= MAX_TIME_S):  # NaN fails too; no float() of a big int
            return f"{k} {_short(v)} is no time a timer measures ({MIN_TIME_S:g} to {MAX_TIME_S:g} s)"
    return None


def _short(v: Any) -> str:
    text = repr(v) if not isinstance(v, int) or isinstance(v, bool) or abs(v) < 10 ** 30 else f"{str(v)[:12]}... ({len(str(v))} digits)"
    return text if len(text) <= 60 else text[:57] + "..."


def valid(rec: Any) -> bool:
    return problem(rec) is None


def parse(lines: Iterable[str | bytes]) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, one note per skipped line: "line N: why"). A later record of the same cell replaces an earlier one."""
    by_key: dict[tuple, dict[str, Any]] = {}
    skipped: list[str] = []
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line of nested brackets
            skipped.append(f"line {n}: not JSON")
            continue
        why = problem(rec)
        if why is not None:
            skipped.append(f"line {n}: {why}")
            continue
        by_key[cell_key(rec)] = rec
    return list(by_key.values()), skipped


def parse_lines(lines: Iterable[str | bytes]) -> tuple[list[dict[str, Any]], int]:
    """(records, number of lines skipped)."""
    records, skipped = parse(lines)
    return records, len(skipped)


def read(logdir: str) -> tuple[list[dict[str, Any]], int]:
    p = path_in(logdir)
    if not os.path.exists(p):
        return [], 0
    with open(p, "rb") as fh:
        return parse_lines(fh)


class Appender:
    """Appends one record per line, flushed and synced, so a kill loses at most the cell being measured."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        p = path_in(logdir)
        # A line cut short by a kill would glue onto the next record: start on a fresh line.
        needs_newline = False
        if os.path.exists(p) and os.path.getsize(p):
            with open(p, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                needs_newline = fh.read(1) != b"\n"
        self._fh = open(p, "a", encoding="utf-8")
        if needs_newline:
            self._fh.write("\n")

    def write(self, rec: dict[str, Any]) -> None:
        self._fh.write(json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()
