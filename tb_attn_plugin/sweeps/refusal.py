"""Why SDPA refused a configuration: sdpa_kernel's RuntimeError ("No available kernel") with the
reasons SDPA gives only as warnings ("Flash attention requires ..."), and the backends with no CPU
kernel named as such."""

from __future__ import annotations

import contextlib
import re
import warnings
from typing import Iterator

# torch's CPU dispatcher (sdp_utils_cpp.cpp) chooses between the flash kernel and math only
NO_CPU_KERNEL = ("efficient", "cudnn")
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?\s*$")
_HEADER = re.compile(r"kernel not used because:?$")


@contextlib.contextmanager
def capture() -> Iterator[list[warnings.WarningMessage]]:
    """Records the warnings of the block; the caller replays them when the call succeeded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


_SHOWN: dict = {}  # the warnings registry of replayed warnings: each shows once, as it would have


def replay(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=_SHOWN)


def warned_reasons(caught: list[warnings.WarningMessage]) -> list[str]:
    """SDPA's own reasons, one line each, without the C++ source location and the header lines."""
    out: list[str] = []
    for w in caught:
        text = str(w.message).strip().splitlines()
        line = _TRIGGERED.sub("", text[0] if text else "").strip()
        if line and not _HEADER.search(line) and line not in out:
            out.append(line)
    return out


def reason(backend: str, device: str, exc: BaseException, caught: list[warnings.WarningMessage],
           torch_version: str = "") -> str:
    first = next((t.strip() for t in str(exc).splitlines() if t.strip()), type(exc).__name__)
    parts = []
    if device == "cpu" and backend in NO_CPU_KERNEL:
        parts.append(f"{backend} has no CPU kernel" + (f" in torch {torch_version}" if torch_version else ""))
    parts += warned_reasons(caught)
    parts.append(f"sdpa_kernel: {first}")
    return "; ".join(parts)[:400]
