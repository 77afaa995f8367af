"""Units and number formatting, in one place: rates from amounts and microseconds, and the text of
rates, bandwidths and byte counts (the frontend's twin is frontend/src/format.ts)."""

from __future__ import annotations

import math


def finite(v: float | None) -> float | None:
    """``v`` when it is a finite number, else None (unknown), never inf or NaN in a report."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def per_second(amount: float | None, time_us: float | None, scale: float = 1.0) -> float | None:
    """``amount`` over ``time_us`` microseconds, per second, divided by ``scale`` (1e12 for TFLOP/s or
    TB/s); None when the time is not a positive number or the rate would not be a finite float (a
    subnormal duration from a hostile trace divides a real amount into infinity)."""
    if finite(amount) is None or finite(time_us) is None or time_us <= 0:
        return None
    try:
        return finite(amount / time_us * (1e6 / scale))
    except (OverflowError, ZeroDivisionError):
        return None


def sig(v: float | None, digits: int = 4) -> float | None:
    """``v`` rounded to ``digits`` significant digits (None stays None)."""
    return None if finite(v) is None else float(f"{v:.{digits}g}")
