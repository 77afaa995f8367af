"""Small wording helpers for text people read: counts with the right plural, names cut with an ellipsis,
times in the unit that reads best."""

from __future__ import annotations

from .units import duration_text


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 call``, ``2 calls``, ``1 profiler step``; ``many`` for irregular plurals."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def percent(fraction: float) -> str:
    """A fraction as a whole percent, except that a small nonzero one never reads "0%": 0.4% of a
    peak is not none of it ('63%', '0.4%', '<0.1%')."""
    if 0 < fraction < 0.001:
        return "<0.1%"
    if 0 < fraction < 0.01:
        return f"{fraction:.1%}"
    return f"{fraction:.0%}"


def cut(text: str, width: int, *, keep_end: bool = False) -> str:
    """``text`` at most ``width`` characters, an ellipsis marking what was cut (its end with keep_end)."""
    text = str(text)
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return "…" + text[-(width - 1):] if keep_end else text[: width - 1] + "…"


def duration(us: float) -> str:
    """A time in microseconds as ``12.3 µs``, ``4.56 ms`` or ``1.23 s`` (the sign kept): text/units.py's."""
    return duration_text(us)
