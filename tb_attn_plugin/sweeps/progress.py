"""The sweep's progress line on stderr: redrawn on a terminal, one line per cell otherwise."""

from __future__ import annotations

import sys
import time


class SweepProgress:
    def __init__(self, total: int, stream=None, enabled: bool = True):
        self.total, self.stream, self.enabled = total, stream or sys.stderr, enabled
        self.done = 0
        self.t0 = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def start(self, what: str) -> None:
        if self.enabled and self.tty:
            self._draw(f"measuring {what}")

    def finish(self, what: str, status: str, detail: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.tty:
            self._draw(f"{what}: {status} {detail}".rstrip())
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total}] {what}: {status} {detail}".rstrip() + "\n")
        self.stream.flush()

    def _draw(self, text: str) -> None:
        width = 24
        filled = int(width * self.done / max(1, self.total))
        elapsed = time.monotonic() - self.t0
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                          f"{elapsed:5.0f}s {text[:60]:<60}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
