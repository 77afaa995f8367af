"""Kernel families added by users from TOML files (``--patterns FILE``, ``TB_ATTN_PATTERNS``), validated.

A file holds ``[[family]]`` tables with exactly the keys of a built-in row (patterns.py)::

    [[family]]
    name = "my_attention_fwd"
    pattern = "my_attn_fwd_kernel"   # a regular expression (RE2 syntax), searched in the kernel name
    stage = "fused"                  # any stage, or "exclude"
    pass = "fwd"                     # fwd, bwd, or "" when the op decides
    implementation = "custom"
    example = "my_attn_fwd_kernel<128>"
    source = "where this name was seen"

A file is untrusted input: its size, the number of rows and the length of every value are bounded,
each pattern must compile with RE2 (safe_regex.py: linear-time matching, so no pattern can hang the
CLI or TensorBoard) and match its own example, and the first problem is one ``PatternError``
naming the file and the row. The user's rows are searched before the built-in ones.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from ..format.errors import TraceError
from ..format.tags import STAGES
from ..trace import limits
from . import patterns as P
from .safe_regex import UnsafePattern, compile_untrusted

ENV = "TB_ATTN_PATTERNS"
MAX_FILE_BYTES = 256 * 1024
MAX_ROWS = 500
MAX_PATTERN = 500  # characters
MAX_TEXT = 2000  # characters of example and source
KEYS = ("name", "pattern", "stage", "pass", "implementation", "example", "source")
REQUIRED = ("name", "pattern", "stage", "example", "source")
KERNEL_STAGES = tuple(s for s in STAGES) + ("matmul", "exclude")
PASSES = ("fwd", "bwd", "")
NAME = re.compile(r"[A-Za-z0-9_.:+-]{1,80}")  # fullmatch: "$" would let a final newline through


class PatternError(ValueError):
    """A pattern file that cannot be used; str() is the one line to show."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


def nested_quantifier(pattern: str) -> bool:
    """True when a repeated group itself repeats something (``(a+)+``, ``(x*y)*``, ``(a|b+){2,}``):
    the shape that makes a backtracking regex take exponential time on a long kernel name. A lint
    for the built-in table, which runs on Python's re; users' patterns run on RE2 (safe_regex.py),
    where no shape backtracks (this check misses ``(a|aa)+$``, for one)."""
    stack = [False]  # per open group: does it contain a quantifier?
    i, n = 0, len(pattern)
    closed_quantified = False  # the group that just closed contained a quantifier
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            closed_quantified = False
            continue
        if c == "[":  # a character class: skip to its end
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            closed_quantified = False
            continue
        if c == "(":
            stack.append(False)
        elif c == ")" and len(stack) > 1:
            inner = stack.pop()
            closed_quantified = inner
            stack[-1] = stack[-1] or inner
            i += 1
            continue
        elif c in "*+{" or (c == "?" and i > 0 and pattern[i - 1] not in "(*+?}"):
            if closed_quantified and c != "?":
                return True
            stack[-1] = True
        closed_quantified = False
        i += 1
    return False


def _row_error(path: str, i: int, name: Any, message: str) -> PatternError:
    label = f"[[family]] #{i + 1}" + (f" ({name!r})" if isinstance(name, str) and name else "")
    return PatternError(path, f"{label}: {message}")


def parse(path: str, data: bytes) -> list[P.KernelFamily]:
    """The rows of one file's bytes; raises PatternError."""
    if len(data) > MAX_FILE_BYTES:
        raise PatternError(path, f"pattern file is {len(data)} bytes; at most {MAX_FILE_BYTES} are accepted")
    if sys.version_info >= (3, 11):  # imported here: only a pattern file needs a TOML parser
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PatternError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PatternError(path, f"not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        raise PatternError(path, "values nested too deeply") from None
    extra = sorted(set(doc) - {"family"})
    if extra:
        raise PatternError(path, f"unknown top-level key {extra[0]!r}; expected only [[family]] tables")
    rows = doc.get("family", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise PatternError(path, "'family' must be an array of tables, written [[family]]")
    if not rows:
        raise PatternError(path, "no [[family]] rows")
    if len(rows) > MAX_ROWS:
        raise PatternError(path, f"{len(rows)} [[family]] rows; at most {MAX_ROWS} are accepted")
    out: list[P.KernelFamily] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        name = row.get("name")
        unknown = sorted(set(row) - set(KEYS))
        if unknown:
            raise _row_error(path, i, name, f"unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise _row_error(path, i, name, f"missing key {missing[0]!r}")
        for k in KEYS:
            if k in row and not isinstance(row[k], str):
                raise _row_error(path, i, name, f"{k!r} must be a string, not {type(row[k]).__name__}")
        if not NAME.fullmatch(name):
            raise _row_error(path, i, name, "'name' must be 1-80 letters, digits or _.:+-")
        if name in seen:
            raise _row_error(path, i, name, "the same name is used by an earlier row")
        seen.add(name)
        pattern, example, source = row["pattern"], row["example"], row["source"]
        if not pattern or len(pattern) > MAX_PATTERN:
            raise _row_error(path, i, name, f"'pattern' must be 1-{MAX_PATTERN} characters")
        if not example or len(example) > MAX_TEXT or not source.strip() or len(source) > MAX_TEXT:
            raise _row_error(path, i, name, f"'example' and 'source' must be 1-{MAX_TEXT} characters")
        try:
            rx = compile_untrusted(pattern)  # RE2: linear time whatever the pattern, (a|aa)+$ included
        except UnsafePattern as exc:
            raise _row_error(path, i, name, f"'pattern' {pattern[:120]!r} is {exc}") from None
        if not rx.search(example):
            raise _row_error(path, i, name, f"'pattern' {pattern!r} does not match its own 'example' {example[:120]!r}")
        stage = row["stage"]
        if stage not in KERNEL_STAGES:
            raise _row_error(path, i, name, f"unknown stage {stage!r}; expected one of {', '.join(KERNEL_STAGES)}")
        pass_ = row.get("pass", "")
        if pass_ not in PASSES:
            raise _row_error(path, i, name, f"unknown pass {pass_!r}; expected fwd, bwd or \"\"")
        impl = row.get("implementation", "") or ("custom" if stage == "fused" else "")
        out.append(P.KernelFamily(name, pattern, None if stage == "exclude" else stage, pass_, impl, example,
                                  f"user: {source} ({os.path.basename(path)})"))
    return out


def _read(path: str) -> bytes:
    """A pattern file's bytes, opened as traces are (trace/limits.py): a regular file of at most
    MAX_FILE_BYTES, so a FIFO or a device named as one is refused, never read (a FIFO would block)."""
    try:
        with limits.open_regular(path, MAX_FILE_BYTES, "pattern file") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    except TraceError as exc:
        raise PatternError(path, exc.cause) from None
    except OSError as exc:
        raise PatternError(path, f"cannot read the pattern file ({exc.strerror or exc})") from None


def load_files(paths: list[str]) -> list[P.KernelFamily]:
    """Every row of every file, in order; raises PatternError for the first bad file."""
    rows: list[P.KernelFamily] = []
    names: dict[str, str] = {}
    for path in paths:
        data = _read(path)
        for fam in parse(path, data):
            if fam.family in names:
                raise PatternError(path, f"[[family]] {fam.family!r} is also defined in {names[fam.family]}")
            names[fam.family] = path
            rows.append(fam)
    return rows


def env_paths(value: str | None = None) -> list[str]:
    """The files named by ``TB_ATTN_PATTERNS`` (``FILE[:FILE…]``, os.pathsep-separated)."""
    value = os.environ.get(ENV, "") if value is None else value
    return [p for p in value.split(os.pathsep) if p.strip()]


_installed_files: tuple[str, ...] = ()


def install(paths: list[str]) -> list[P.KernelFamily]:
    """Load the files and make their rows part of the table searched by kernel_family()."""
    rows = load_files(paths)
    install_rows(rows, paths)
    return rows


def install_rows(rows, paths=()) -> None:
    """Make already-validated rows (from ``paths``) the user's part of the table; () removes them.
    A Dask worker gets the rows this way, since the client's pattern files need not exist there."""
    global _installed_files
    P.set_user_families(tuple(rows))
    _installed_files = tuple(paths) if rows else ()


def installed_files() -> tuple[str, ...]:
    """The pattern files whose rows are in the table now (() once set_user_families(()) ran)."""
    return _installed_files if P.user_families() else ()


def install_from_env() -> list[P.KernelFamily]:
    return install(env_paths())


def fingerprint(paths: list[str] | None = None) -> str:
    """A digest of the pattern files' contents ("" without any): part of every cached report's key,
    so that a changed pattern file is never answered with reports made before the change."""
    paths = env_paths() if paths is None else paths
    if not paths:
        return ""
    import hashlib  # here: OpenSSL's load (~3 ms) only with pattern files

    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:
            h.update(_read(path))
        except PatternError as exc:
            h.update(f"unreadable: {exc}".encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def toml_row(kernel_name: str, name: str = "my_attention", stage: str = "fused", pass_: str = "fwd",
             pattern: str | None = None) -> str:
    """A ready-to-edit [[family]] row matching ``kernel_name`` (for the safety net's suggestions);
    ``pattern``: the one to use (safety.suggest_pattern checks it on the trace), else the name's stem."""
    if pattern is None:
        stem = re.split(r"[<(]", kernel_name, maxsplit=1)[0].strip()
        stem = stem.split(" ")[-1] if " " in stem else stem
        pattern = re.escape(stem or kernel_name[:80])
    return "\n".join([
        "[[family]]",
        f"name = {_toml_str(name)}",
        f"pattern = {_toml_str(pattern)}",
        f"stage = {_toml_str(stage)}",
        f"pass = {_toml_str(pass_)}",
        'implementation = "custom"',
        f"example = {_toml_str(kernel_name[:MAX_TEXT])}",
        'source = "where this name was seen"',
    ])


def _toml_str(s: str) -> str:
    # TOML basic strings use JSON's escapes for quotes, backslashes and control characters.
    import json

    return json.dumps(s, ensure_ascii=False)


def describe(fams) -> list[dict[str, Any]]:
    """The table as rows for ``tb-attn patterns`` and its JSON."""
    user = set(id(f) for f in P.user_families())
    return [{"name": f.family, "pattern": f.pattern, "stage": f.stage or "exclude", "pass": f.pass_,
             "implementation": f.implementation, "example": f.example, "source": f.source,
             "origin": "user" if id(f) in user else "built-in"} for f in fams]
