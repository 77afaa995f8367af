"""A device's snapshot trace entries as columns (EntryRows), whichever loader read them: the C
decoder hands them over as columns, the plain unpickler's dicts are turned into the same ones
here, so snapshot.py reads one form with one set of rules."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, Sequence

from .timeline import ADDR_MASK

NOT_STR = -1  # action code: the entry's action is not a string
NOT_DICT = -2  # action code: the entry is not a dict at all (skipped)
# An entry's frame is its innermost Python frame outside torch (else its first); the C decoder
# applies the same rule with these two strings.
SKIP_FRAMES = "/torch/"
SKIP_PREFIX = "??"
_I64 = 1 << 63


@dataclass
class EntryRows:
    """Entries in record order. Integers are 0 where the entry's value is not a plain int of 64
    bits (addr: masked as timeline.ADDR_MASK); time_us is NaN where it is not a plain number;
    time_kind is 1 where the entry had a number of any type there (bool included)."""

    action: Sequence[int]  # index into actions, or NOT_STR / NOT_DICT
    actions: list
    size: Sequence[int]
    addr: Sequence[int]
    stream: Sequence[int]
    time_us: Sequence[float]
    time_kind: Sequence[int]
    device_free: Sequence[int]
    frame: Sequence[int]  # index into frames, -1: none
    frames: list  # (filename, line, name) of the frames rows name

    def __len__(self) -> int:
        return len(self.action)

    def frame_text(self, i: int) -> str | None:
        """'file.py:12 forward' for entry i's frame, when it has one."""
        k = self.frame[i]
        if k < 0:
            return None
        fn, line, name = self.frames[k]
        return f"{fn.rsplit('/', 1)[-1]}:{line} {name}"


_VIEWS = {"group": "i", "action": "h", "size": "q", "addr": "q", "stream": "q", "time_us": "d", "time_kind": "b",
          "device_free": "q", "frame": "i"}


def from_columns(cols: dict[str, bytes], n: int, groups: list[int], actions: list,
                 frames: list) -> dict[int, EntryRows]:
    """The C decoder's columns, split by device (``groups[g]``: the device of row group g)."""
    views = {k: memoryview(cols[k]).cast(t) for k, t in _VIEWS.items()}
    devices = sorted(set(groups))
    if len(devices) == 1:  # the usual snapshot: one process, one device; no copy
        return {devices[0]: _rows(views, actions, frames)}
    out = {}
    group = views.pop("group")
    for dev in devices:
        mine = {g for g, d in enumerate(groups) if d == dev}
        keep = [i for i in range(n) if group[i] in mine]
        out[dev] = _rows({k: array(_VIEWS[k], (col[i] for i in keep)) for k, col in views.items()}, actions, frames)
    return out


def _rows(cols: dict[str, Sequence], actions: list, frames: list) -> EntryRows:
    return EntryRows(cols["action"], actions, cols["size"], cols["addr"], cols["stream"], cols["time_us"],
                     cols["time_kind"], cols["device_free"], cols["frame"], frames)


def _int64(v: Any) -> int:
    return v if type(v) is int and -_I64 <= v < _I64 else 0


def from_dicts(entries: list) -> EntryRows:
    """The same columns from the plain unpickler's entry dicts (the slow path: any layout)."""
    action, size, addr, stream, t, kind, dfree, frame = (array("h"), array("q"), array("q"), array("q"), array("d"),
                                                         array("b"), array("q"), array("i"))
    codes: dict[str, int] = {}
    actions: list[str] = []
    frame_codes: dict[tuple, int] = {}
    frames: list[tuple] = []
    for e in entries:
        if type(e) is not dict:
            action.append(NOT_DICT)
            for col in (size, addr, stream, dfree, frame):
                col.append(0 if col is not frame else -1)
            t.append(math.nan)
            kind.append(0)
            continue
        a = e.get("action")
        if type(a) is str:
            if a not in codes:
                codes[a] = len(actions)
                actions.append(a)
            action.append(codes[a])
        else:
            action.append(NOT_STR)
        size.append(_int64(e.get("size")))
        x = e.get("addr")
        addr.append(x & ADDR_MASK if type(x) is int else 0)
        stream.append(_int64(e.get("stream")))
        dfree.append(_int64(e.get("device_free")))
        x = e.get("time_us")
        kind.append(1 if isinstance(x, (int, float)) else 0)
        if type(x) is int:
            try:
                t.append(float(x))
            except OverflowError:
                t.append(math.nan)
        else:
            t.append(x if type(x) is float else math.nan)
        f = _chosen_frame(e.get("frames"))
        if f is None:
            frame.append(-1)
            continue
        try:
            k = frame_codes.setdefault(f, len(frames))
        except TypeError:  # an unhashable line or name: not shared, still shown
            k = len(frames)
        if k == len(frames):
            frames.append(f)
        frame.append(k)
    return EntryRows(action, actions, size, addr, stream, t, kind, dfree, frame, frames)


def _chosen_frame(frames: Any) -> tuple | None:
    if not isinstance(frames, list):
        return None
    first = None
    for f in frames:
        if not isinstance(f, dict):
            continue
        fn = f.get("filename")
        if not isinstance(fn, str):
            continue
        this = (fn, f.get("line"), f.get("name"))
        first = first or this
        if SKIP_FRAMES not in fn and not fn.startswith(SKIP_PREFIX):
            return this
    return first
