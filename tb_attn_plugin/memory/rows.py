"""A device's snapshot trace entries as columns (EntryRows), whichever loader read them: the C
decoder hands them over as columns, the plain unpickler's dicts are turned into the same ones
here, so snapshot.py reads one form with one set of rules."""

from __future__ import annotations

import math
from array import array
from typing import Any, Sequence

import msgspec

from .frame_rules import KEPT, PYTHON, SHOWN, frame_bits
from .timeline import ADDR_MASK

NOT_STR = -1  # action code: the entry's action is not a string
NOT_DICT = -2  # action code: the entry is not a dict at all (skipped)
# An entry's frame is its innermost frame of user Python code (else its outermost frame a rule
# matches, such as an autograd node; else its first) and its stack the
# frames frame_rules matches; the C decoder applies the same rule through frame_bits.
_I64 = 1 << 63


class EntryRows(msgspec.Struct):
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
    stack: Sequence[int] = ()  # index into stacks, -1: no frame a rule matches
    stacks: list = ()  # tuples of indices into frames: the frames rules match, innermost first

    def __len__(self) -> int:
        return len(self.action)

    def frame_text(self, i: int) -> str | None:
        """'file.py:12 forward' for entry i's frame, when it has one."""
        k = self.frame[i]
        if k < 0:
            return None
        return text_of(self.frames[k])


def text_of(frame: tuple) -> str:
    fn, line, name = frame
    return f"{fn.rsplit('/', 1)[-1]}:{line} {name}"


_VIEWS = {"group": "i", "action": "h", "size": "q", "addr": "q", "stream": "q", "time_us": "d", "time_kind": "b",
          "device_free": "q", "frame": "i", "stack": "i"}


def from_columns(cols: dict[str, bytes], n: int, groups: list[int], actions: list,
                 frames: list, stacks: list) -> dict[int, EntryRows]:
    """The C decoder's columns, split by device (``groups[g]``: the device of row group g)."""
    views = {k: memoryview(cols[k]).cast(t) for k, t in _VIEWS.items()}
    devices = sorted(set(groups))
    if len(devices) == 1:  # the usual snapshot: one process, one device; no copy
        return {devices[0]: _rows(views, actions, frames, stacks)}
    out = {}
    group = views.pop("group")
    rows_of: dict[int, list[int]] = {dev: [] for dev in devices}  # one pass: devices x rows would be quadratic
    for i in range(n):
        rows_of[groups[group[i]]].append(i)
    for dev, keep in rows_of.items():
        out[dev] = _rows({k: array(_VIEWS[k], (col[i] for i in keep)) for k, col in views.items()}, actions, frames,
                         stacks)
    return out


def _rows(cols: dict[str, Sequence], actions: list, frames: list, stacks: list) -> EntryRows:
    return EntryRows(cols["action"], actions, cols["size"], cols["addr"], cols["stream"], cols["time_us"],
                     cols["time_kind"], cols["device_free"], cols["frame"], frames, cols["stack"], stacks)


def _int64(v: Any) -> int:
    return v if type(v) is int and -_I64 <= v < _I64 else 0


def from_dicts(entries: list) -> EntryRows:
    """The same columns from the plain unpickler's entry dicts (the slow path: any layout)."""
    action, size, addr, stream, t, kind, dfree, frame, stack = (array("h"), array("q"), array("q"), array("q"),
                                                                array("d"), array("b"), array("q"), array("i"),
                                                                array("i"))
    codes: dict[str, int] = {}
    actions: list[str] = []
    fr = _Frames()
    for e in entries:
        if type(e) is not dict:
            action.append(NOT_DICT)
            for col in (size, addr, stream, dfree, frame, stack):
                col.append(0 if col is not frame and col is not stack else -1)
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
        f, s = fr.read(e.get("frames"))
        frame.append(f)
        stack.append(s)
    return EntryRows(action, actions, size, addr, stream, t, kind, dfree, frame, fr.frames, stack, fr.stacks)


class _Frames:
    """_snapshot_decode.c's read_frames in Python: frames and stacks interned, frame_bits once per frame."""

    def __init__(self):
        self.frames: list[tuple] = []
        self.bits: list[int] = []
        self.codes: dict[tuple, int] = {}
        self.stacks: list[tuple] = []
        self.stack_codes: dict[tuple, int] = {}
        # torch shares one frame list among the entries of one traceback: each list is read once
        # (the document holds them all while rows are made, so an id is never reused).
        self.by_list: dict[int, tuple[int, int]] = {}

    def code(self, f: Any) -> int:
        if type(f) is not dict:
            return -1
        fn = f.get("filename")
        if type(fn) is not str:
            return -1
        key = (fn, f.get("line"), f.get("name"))
        try:
            k = self.codes.get(key)
        except TypeError:  # an unhashable line or name: not shared, still read
            k, key = None, None
        if k is None:
            k = len(self.frames)
            self.frames.append((fn, f.get("line"), f.get("name")))
            self.bits.append(frame_bits(fn, f.get("name")))
            if key is not None:
                self.codes[key] = k
        return k

    def read(self, frames: Any) -> tuple[int, int]:
        """(the shown frame or the first, -1: none; the stack, -1: none) of one entry's frame list."""
        if type(frames) is not list:
            return -1, -1
        got = self.by_list.get(id(frames))
        if got is None:
            got = self.by_list[id(frames)] = self._read(frames)
        return got

    def _read(self, frames: list) -> tuple[int, int]:
        first = shown = rule = -1
        kept: list[int] = []
        keep = KEPT | PYTHON if len(self.stack_codes) < MAX_PYTHON_STACKS else KEPT
        for f in frames:
            k = self.code(f)
            if k < 0:
                continue
            b = self.bits[k]
            if first < 0:
                first = k
            if shown < 0 and b & SHOWN:
                shown = k
            if b & KEPT:
                rule = k
            if b & keep and len(kept) < MAX_KEPT:
                kept.append(k)
        # Else the outermost frame a rule names: an autograd node (or op) frame, not a C++ internal.
        shown = shown if shown >= 0 else rule if rule >= 0 else first
        if not kept:
            return shown, -1
        key = tuple(kept)
        s = self.stack_codes.get(key)
        if s is None:
            s = self.stack_codes[key] = len(self.stacks)
            self.stacks.append(key)
        return shown, s


MAX_KEPT = 64  # as the decoder: a deeper stack keeps its innermost 64 matched frames
MAX_PYTHON_STACKS = 65536  # as the decoder: past this many distinct stacks, new ones keep rule frames only
