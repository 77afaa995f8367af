"""The C event scanner (``_scanner.c``), fed chunk by chunk on a second thread.

Also the op tree's one sequential pass (nest_sorted, a stack over numpy columns; link.op_tree
sorts them with numpy first).

The scanner finds the event array's chunks and drops the events the analysis never reads, without
holding the GIL; so while the caller decodes one chunk with msgspec, the next one is being scanned.
With a route (events._ROUTE) it also sorts the kept events into their lists, checks their times and
writes a fixed-width record of each (table.Table turns those into columns; a [memory] instant is only
its record), work that then runs on the scanner's thread instead of the caller's.
At most two scanned chunks wait in between, which bounds the memory this adds. The extension is
optional (built by setup.py when a compiler is there); ``available`` says whether it was.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from .pipeline import pipe

try:
    from ._scanner import REC_SIZE
    from ._scanner import scan_events as _scan_events
except ImportError:  # no compiler at install time (or an older build): events.py decodes every event instead
    _scan_events = None
    REC_SIZE = 0
try:
    from ._scanner import nest_sorted
except ImportError:
    nest_sorted = None

available = _scan_events is not None


def _nest_sorted_python(ts, dur, op_at, lts, launch_at, parent, subtree_end, depth, launch_op) -> None:
    """_scanner.nest_sorted's pass in Python, for an install without a compiler (same arguments,
    same results; far slower on a big trace)."""
    ts, dur, lts = ts.tolist(), dur.tolist(), lts.tolist()
    par, send, dep, lop = [-1] * len(ts), [0] * len(ts), [0] * len(ts), [-1] * len(lts)
    for t in range(len(op_at) - 1):
        stack: list[int] = []
        ends: list[float] = []
        li, lend, end_all = int(launch_at[t]), int(launch_at[t + 1]), int(op_at[t + 1])
        for i in range(int(op_at[t]), end_all):
            start = ts[i]
            while li < lend and lts[li] < start:
                while ends and ends[-1] <= lts[li]:
                    send[stack.pop()] = i
                    ends.pop()
                lop[li] = stack[-1] if stack else -1
                li += 1
            while ends and ends[-1] <= start:
                send[stack.pop()] = i
                ends.pop()
            par[i] = stack[-1] if stack else -1
            dep[i] = len(stack)
            stack.append(i)
            ends.append(start + dur[i])
        for li in range(li, lend):
            while ends and ends[-1] <= lts[li]:
                send[stack.pop()] = end_all
                ends.pop()
            lop[li] = stack[-1] if stack else -1
        for j in stack:
            send[j] = end_all
    parent[:], subtree_end[:], depth[:], launch_op[:] = par, send, dep, lop


if nest_sorted is None:
    nest_sorted = _nest_sorted_python


def _can_stream() -> bool:
    """Whether the built scanner takes windows of a streamed file (an older build does not)."""
    if _scan_events is None:
        return False
    try:
        return _scan_events(b"[{}", 1, 1 << 20, (), b"", b"", b"", True)[0] == b"[]"
    except TypeError:
        return False


streaming = _can_stream()
PIPELINE_MIN_BYTES = 8 << 20  # smaller arrays are scanned inline: a thread would cost more than it saves


def each_chunk(text: bytes, start: int, budget: int, rules: tuple,
               on_chunk: Callable[[bytes | tuple, int], None], route: tuple | None = None) -> int | None:
    """Scan the event array whose '[' is at ``text[start]``, calling ``on_chunk(kept, dropped)``
    for each chunk of about ``budget`` bytes, in order (``kept``: the JSON array of kept events, or
    with ``route`` the scanner's routed lists, see _scanner.scan_events). Returns the index of the array's ']', or
    None when the text is not a plain array (cut short, unbalanced, a stray character); chunks
    before that point may already have been passed on."""
    assert _scan_events is not None
    scan = _inline if len(text) - start < PIPELINE_MIN_BYTES else _pipelined
    with contextlib.closing(scan(text, start, budget, rules, route)) as chunks:
        for kept, dropped, nxt, done in chunks:
            if kept is None:
                return None
            on_chunk(kept, dropped)
            if done:
                return nxt
    return None


def scan_window(text: bytes, pos: int, budget: int, rules: tuple, partial: bool, route: tuple | None = None,
                slim: tuple | None = None) -> tuple:
    """One scanner call on a window of a streamed file (see stream.py): with ``partial``, an event
    cut by the window's end is left for the next window, which starts at the returned ``next``."""
    return _scan_events(text, pos, budget, *rules, partial, route, slim)


def _inline(text: bytes, start: int, budget: int, rules: tuple, route: tuple | None) -> Iterator[tuple]:
    """The scanner's chunks in order, up to the one that ends the array or finds it not plain."""
    pos = start + 1
    while True:
        item = _scan_events(text, pos, budget, *rules, False, route)
        yield item
        if item[0] is None or item[3]:
            return
        pos = item[2]


def _pipelined(text: bytes, start: int, budget: int, rules: tuple, route: tuple | None) -> Iterator[tuple]:
    """The same chunks, scanned ahead on a second thread; closing the generator stops it."""
    return pipe(_inline(text, start, budget, rules, route), name="tb-attn-scan")
