"""A generator run ahead on a thread of its own, behind a bounded queue: how reading, scanning and
decoding a trace overlap (zlib, ISA-L and the C scanner release the GIL)."""

from __future__ import annotations

import queue
import threading
from typing import Iterator


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
