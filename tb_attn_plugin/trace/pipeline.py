"""Work on two threads at once: a generator run ahead behind a bounded queue (how reading, scanning
and decoding a trace overlap: zlib, ISA-L and the C scanner release the GIL), and one call run
beside the caller's own work (the op tree's C nesting, which releases it too)."""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator, TypeVar

A = TypeVar("A")
B = TypeVar("B")


def pipe(source: Iterator, depth: int = 2, name: str = "tb-attn-stream") -> Iterator:
    """Run the ``source`` generator on a thread of its own, handing its items over a bounded queue.
    Closing this generator (or the consumer failing) stops the thread and closes ``source``."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in source:
                if not put(item):
                    return
            put(end)
        except BaseException as exc:  # handed to the consumer's thread
            put(exc)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # a generator holding a pipe of its own stops that one too

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join()


def together(beside: Callable[[], A], here: Callable[[], B], name: str = "tb-attn-beside") -> tuple[A, B]:
    """(beside(), here()): ``beside`` on a thread of its own while the caller runs ``here``. Both
    always finish before this returns; an error of either is raised (``here``'s first). Only a
    gain where one of them spends its time in C that releases the GIL."""
    got: list = []

    def run() -> None:
        try:
            got.append((True, beside()))
        except BaseException as exc:  # handed to the caller's thread
            got.append((False, exc))

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    try:
        mine = here()
    finally:
        t.join()
    ok, value = got[0]
    if not ok:
        raise value
    return value, mine
