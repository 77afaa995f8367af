"""What the command line's two modules share (cli.py, cli_kernels.py): the progress bar and --json's
error object for failures that are no trace's own."""

from __future__ import annotations

import sys
import time

from .text import json_text
from .text.words import cut


class ProgressBar:
    """A one-line bar on stderr, shown only once an analysis has run for more than a second."""

    def __init__(self, label: str, stream=sys.stderr, delay: float = 1.0):
        self.label, self.stream, self.delay = label, stream, delay
        self.t0 = time.monotonic()
        self.shown = False

    def __call__(self, phase: str, frac: float) -> None:
        if not self.shown and time.monotonic() - self.t0 < self.delay:
            return
        if not self.shown and not self.stream.isatty() and frac < 1.0:
            # not a terminal: one line per phase instead of redrawing
            if phase == getattr(self, "_last_phase", None):
                return
            self._last_phase = phase
            self.stream.write(f"{self.label}: {phase}…\n")
            self.stream.flush()
            return
        self.shown = True
        width = 30
        done = int(frac * width)
        self.stream.write(f"\r{cut(self.label, 40, keep_end=True)} [{'#' * done}{'.' * (width - done)}] {phase:<18}")
        if frac >= 1.0:
            self.stream.write("\n")
        self.stream.flush()


def fail_json_message(message: str, path: str | None = None) -> None:
    """A failure that is no trace's own (out of memory, a bad --patterns file, no Dask scheduler) as
    --json's error object: {"error": message, "errors": [{"path": the file or null, "error": message}]}."""
    sys.stdout.write(json_text.dumps({"error": message, "errors": [{"path": path, "error": message}]}) + "\n")
