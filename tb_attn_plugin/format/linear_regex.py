"""Regular expressions matched in time linear in the text (RE2), for every table that reads names from a trace.

Python's ``re`` backtracks: a built-in row such as ``\\b(flash::)?flash_\\w+<[^(]*\\bFlash_bwd_kernel_traits<``
searched in a 64 KB kernel name built of ``flash_a<`` repeats runs for seconds (issue 47, item 7), and a
trace is untrusted text. RE2 (google-re2, https://github.com/google/re2/wiki/Syntax) never backtracks.
Its syntax is Python's minus lookaround and backreferences; ``\\w``, ``\\d`` and ``\\b`` are ASCII-only
there, and ``$`` matches only at the very end (Python's also before a final newline).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled program: a counted repeat like (x{999}){999} is refused


class NotLinear(ValueError):
    """RE2 cannot compile the pattern; str() says why in one line."""


MEMO_ENTRIES = 2048  # texts remembered per program and method (least recently used dropped)
MEMO_TEXT = 256  # characters: longer texts are matched each time (a hostile trace's names cannot fill memory)


class Linear:
    """An RE2 program with ``re``'s methods. One call through google-re2's Python layer costs about
    1 µs (``re``: 0.05 µs), and the analysis asks the same few hundred op and kernel names millions of
    times (an op's enclosing ops, for each rule), so ``search``/``match``/``fullmatch`` remember their
    answers for short texts (an LRU of MEMO_ENTRIES each)."""

    __slots__ = ("program", "pattern", "search", "match", "fullmatch")

    def __init__(self, program: Any):
        self.program = program
        self.pattern = program.pattern
        for how in ("search", "match", "fullmatch"):
            setattr(self, how, _remembered(getattr(program, how)))

    def __getattr__(self, name: str) -> Any:  # sub, finditer, findall, split, groups: as RE2 has them
        return getattr(self.program, name)


def _remembered(ask: Callable[[str], Any]) -> Callable[[str], Any]:
    cached = lru_cache(maxsize=MEMO_ENTRIES)(ask)
    return lambda text: cached(text) if len(text) <= MEMO_TEXT else ask(text)


def compile_linear(pattern: str, ignore_case: bool = False) -> Linear:
    """A compiled RE2 program with ``.search/.match/.fullmatch/.sub`` (``re``'s API); raises NotLinear."""
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is an install requirement
        raise NotLinear("patterns need the google-re2 package (pip install google-re2), which never "
                        "backtracks; it is not installed") from None
    opts = re2.Options()
    opts.log_errors = False  # RE2 would print its parse errors on stderr itself
    opts.max_mem = MAX_MEM
    opts.case_sensitive = not ignore_case
    try:
        program = re2.compile(pattern, options=opts)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise NotLinear(f"not a pattern RE2 accepts ({why}; RE2 has no lookaround or backreferences)") from None
    return Linear(program)


class FirstMatch:
    """Which of a table's programs (in order) is the first to match a text. Most names a trace holds match
    no row of a table, so one program that matches where any row does answers them in one RE2 call; only
    a text it matches is asked row by row (``how``: "search" or "fullmatch", as each row is asked)."""

    __slots__ = ("programs", "_any", "_how")

    def __init__(self, patterns: list[str], how: str = "search", ignore_case: bool = False):
        self.programs = [compile_linear(p, ignore_case) for p in patterns]
        self._how = how
        try:
            self._any: Any = getattr(compile_linear("|".join(f"(?:{p})" for p in patterns), ignore_case), how) \
                if patterns else (lambda text: None)
        except NotLinear:  # the joined program past MAX_MEM: every row asked
            self._any = lambda text: True

    def any(self, text: str) -> bool:
        """Whether any program matches ``text`` (one RE2 call)."""
        return bool(self._any(text))

    def index(self, text: str) -> int:
        """The position of the first program that matches ``text``, -1 where none does."""
        if not self._any(text):
            return -1
        for i, rx in enumerate(self.programs):
            if getattr(rx, self._how)(text):
                return i
        return -1
