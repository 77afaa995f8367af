"""Work on two threads at once: a generator run ahead behind a bounded queue (how reading, scanning
and decoding a trace overlap: zlib, ISA-L and the C scanner release the GIL)."""

from __future__ import annotations

import queue
import threading
from typing import Iterator


class Ahead:
    """The ``source`` generator run on a thread of its own from now on, its items handed over a
    bounded queue of ``depth``: iterate this to take them. close() stops the thread and closes
    ``source``, whether or not anything was taken (a reading begun before its caller was ready)."""

    def __init__(self, source: Iterator, depth: int = 2, name: str = "tb-attn-stream"):
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._end = object()
        self._thread = threading.Thread(target=self._run, args=(source,), name=name, daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, source: Iterator) -> None:
        try:
            for item in source:
                if not self._put(item):
                    return
            self._put(self._end)
        except BaseException as exc:  # handed to the consumer's thread
            self._put(exc)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # a generator holding a pipe of its own stops that one too

    def __iter__(self) -> Iterator:
        while True:
            item = self._q.get()
            if item is self._end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def pipe(source: Iterator, depth: int = 2, name: str = "tb-attn-stream") -> Iterator:
    """Ahead as a generator: the thread starts with the first item asked for, and closing this
    generator (or the consumer failing) stops it and closes ``source``."""
    ahead = Ahead(source, depth, name)
    try:
        yield from ahead
    finally:
        ahead.close()
