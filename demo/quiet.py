"""Keeps the profiler's USDT trace-point lines (kineto writes one to stderr at every profiler start
and stop) out of the demo's output; every other line of stderr, errors included, passes unchanged.

kineto's own switch (KINETO_LOG_LEVEL=6) would silence its errors too, so the lines are filtered
at the file descriptor instead: C++ writes to fd 2, which Python's sys.stderr cannot intercept.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

DROP = b"USDT:"


@contextlib.contextmanager
def without_usdt_lines():
    try:
        fd = sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):  # no real stderr (embedded, redirected to an object)
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    read_end, write_end = os.pipe()
    os.dup2(write_end, fd)
    os.close(write_end)

    def pump():
        with os.fdopen(read_end, "rb") as src:
            for line in src:
                if not line.startswith(DROP):
                    os.write(saved, line)

    t = threading.Thread(target=pump, name="demo-stderr-filter", daemon=True)
    t.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)  # the pipe's last writer goes: the pump reads to the end and stops
        t.join(10)
        os.close(saved)
