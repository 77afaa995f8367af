"""Regular expressions from users (pattern files), compiled with RE2, which never backtracks.

Python's ``re`` backtracks: ``(a|aa)+$`` against ``'a' * 44 + '!'`` runs for minutes, and no syntax
check catches every such shape (alternation, overlapping classes, counted repeats). RE2
(google-re2, https://github.com/google/re2/wiki/Syntax) matches in time linear in the name, so a
pattern file can make a match wrong but never slow. Its syntax is Python's minus lookaround and
backreferences (refused with RE2's own message); ``\\w``, ``\\d`` and ``\\b`` are ASCII-only there.
The built-in table (patterns.py) stays on ``re``: its rows are ours and tested.
"""

from __future__ import annotations

from typing import Any

MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled program: a counted repeat like (x{999}){999} is refused


class UnsafePattern(ValueError):
    """The pattern cannot be compiled by RE2; str() says why in one line."""


def compile_untrusted(pattern: str) -> Any:
    """A compiled RE2 program with ``.search(text)``; raises UnsafePattern."""
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is an install requirement
        raise UnsafePattern("user patterns need the google-re2 package (pip install google-re2), which never "
                            "backtracks; it is not installed") from None
    opts = re2.Options()
    opts.log_errors = False  # RE2 would print its parse errors on stderr itself
    opts.max_mem = MAX_MEM
    try:
        return re2.compile(pattern, options=opts)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise UnsafePattern(f"not a pattern RE2 accepts ({why}; RE2 has no lookaround or backreferences)") from None
