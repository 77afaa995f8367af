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


def _num(v: float, digits: int = 3) -> str:
    return f"{float(f'{v:.{digits}g}'):g}" if abs(v) < 10 ** digits else f"{v:.0f}"


def flops_rate_text(tflops: float | None, digits: int = 3) -> str:
    """A FLOP rate given in TFLOP/s, in the unit that keeps it readable: '1.23 TFLOP/s', '21.7 GFLOP/s',
    '512 MFLOP/s' (a CPU's attention is never '0.0 TFLOP/s'); 'unknown' for None."""
    if finite(tflops) is None:
        return "unknown"
    for scale, unit in ((1.0, "TFLOP/s"), (1e-3, "GFLOP/s"), (1e-6, "MFLOP/s")):
        if abs(tflops) >= scale:
            return f"{_num(tflops / scale, digits)} {unit}"
    return f"{_num(tflops / 1e-9, digits)} kFLOP/s" if tflops else "0 FLOP/s"


def flops_rate_pair_text(achieved: float | None, of: float | None, digits: int = 3) -> str:
    """'21.7 of 196 GFLOP/s': two rates in the unit of the larger, so they read against each other."""
    if finite(achieved) is None or finite(of) is None:
        return f"{flops_rate_text(achieved, digits)} of {flops_rate_text(of, digits)}"
    unit = flops_rate_text(max(abs(achieved), abs(of))).split(" ", 1)[1]
    scale = {"TFLOP/s": 1.0, "GFLOP/s": 1e-3, "MFLOP/s": 1e-6, "kFLOP/s": 1e-9, "FLOP/s": 1e-12}[unit]
    return f"{_num(achieved / scale, digits)} of {_num(of / scale, digits)} {unit}"


def bandwidth_text(tbs: float | None, digits: int = 3) -> str:
    """A bandwidth given in TB/s (10^12 bytes/s), in TB/s from 1 TB/s, else GB/s or MB/s; 'unknown' for None."""
    if finite(tbs) is None:
        return "unknown"
    for scale, unit in ((1.0, "TB/s"), (1e-3, "GB/s")):
        if abs(tbs) >= scale:
            return f"{_num(tbs / scale, digits)} {unit}"
    return f"{_num(tbs / 1e-6, digits)} MB/s"


def percent_text(fraction: float | None) -> str:
    return "unknown" if finite(fraction) is None else f"{fraction:.0%}"


def duration_text(us: float | None, digits: int | None = None) -> str:
    """A time given in microseconds in the unit its magnitude picks: '12.3 µs', '4.56 ms', '1.23 s'
    (the sign kept; never '171559.4 µs'); with ``digits``, that many significant digits ('171 ms');
    'unknown' for None."""
    if finite(us) is None:
        return "unknown"
    for scale, unit, places in ((1.0, "µs", 1), (1e3, "ms", 2), (1e6, "s", 2)):
        v = us / scale
        shown = float(f"{abs(v):.{digits}g}") if digits else round(abs(v), places)
        if shown < 1000 or unit == "s":  # the smallest unit that shows it under 1000 (never '1000.0 µs')
            return f"{_num(v, digits)} {unit}" if digits else f"{v:.{places}f} {unit}"
    raise AssertionError("unreachable")


def bytes_text(n: float | None) -> str:
    """Bytes in binary units with one decimal ('1.5 MiB', '820.0 MiB', '3.2 GiB'), whole bytes below 1 KiB."""
    if finite(n) is None:
        return "unknown"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"
