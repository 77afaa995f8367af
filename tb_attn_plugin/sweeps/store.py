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


def valid(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    for k, t in REQUIRED.items():
        v = rec.get(k)
        if not isinstance(v, t) or isinstance(v, bool):
            return False
    return rec["status"] in STATUSES and rec["batch"] > 0 and rec["seq_len"] > 0


def parse_lines(lines: Iterable[str | bytes]) -> tuple[list[dict[str, Any]], int]:
    """(records, number of lines skipped). A later record of the same cell replaces an earlier one."""
    by_key: dict[tuple, dict[str, Any]] = {}
    skipped = 0
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line of nested brackets
            skipped += 1
            continue
        if not valid(rec):
            skipped += 1
            continue
        by_key[cell_key(rec)] = rec
    return list(by_key.values()), skipped


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
