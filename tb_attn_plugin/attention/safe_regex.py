"""Regular expressions from users (pattern files), compiled with RE2, which never backtracks.

Python's ``re`` backtracks: ``(a|aa)+$`` against ``'a' * 44 + '!'`` runs for minutes, and no syntax
check catches every such shape (alternation, overlapping classes, counted repeats). RE2 matches in
time linear in the name, so a pattern file can make a match wrong but never slow. The built-in
tables are compiled the same way (format/linear_regex.py).
"""

from __future__ import annotations

from typing import Any

from ..format.linear_regex import NotLinear, compile_linear


class UnsafePattern(ValueError):
    """The pattern cannot be compiled by RE2; str() says why in one line."""


def compile_untrusted(pattern: str) -> Any:
    """A compiled RE2 program with ``.search(text)``; raises UnsafePattern."""
    try:
        return compile_linear(pattern)
    except NotLinear as exc:
        raise UnsafePattern(str(exc)) from None
