"""What the reader refuses before it reads: files that are not regular files, and traces larger than
memory allows (gzip bombs included: inflation stops at the limit).

The limit is ``TB_ATTN_MAX_TRACE_BYTES`` (bytes, or with a K/M/G suffix), else a third of the memory
available to this process (the analysis holds about 2.5-3x the JSON text at its peak: see the
million-event test in docs/robustness.md), and never under 64 MiB.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Callable

from ..format.errors import TraceError
from . import inflate

ENV = "TB_ATTN_MAX_TRACE_BYTES"
MIN_DEFAULT = 64 << 20
_SIZE = re.compile(r"([0-9]+)([KMG]i?B?|B)?", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def available_memory() -> int | None:
    """Bytes this process could still allocate: MemAvailable, capped by RLIMIT_AS; None if unknown."""
    avail = None
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            avail = soft if avail is None else min(avail, soft)
    except (ImportError, ValueError, OSError):
        pass
    return avail


def max_trace_bytes(path: str = "") -> int:
    """The most bytes of JSON text one trace may have (before or after inflating)."""
    raw = os.environ.get(ENV, "").strip()
    if raw:
        m = _SIZE.fullmatch(raw) if raw.isascii() else None
        if not m:
            raise TraceError(path or ENV, f"{ENV}={raw[:40]!r} is not a size (bytes, or a number with K, M or G)")
        return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].upper()]
    avail = available_memory()
    return max(MIN_DEFAULT, avail // 3) if avail else 8 << 30


def human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


class TooBig(TraceError):
    """A trace over the size limit."""


def too_big(path: str, limit: int, what: str) -> TooBig:
    how = f"{ENV}" if os.environ.get(ENV) else f"a third of the available memory; set {ENV} to change it"
    return TooBig(path, f"{what} more than {human(limit)}, the limit for one trace ({how})")


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


TRACE = "trace file"


def refuse_non_regular(path: str, mode: int, what: str = TRACE) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise TraceError(path, f"is a directory, not a {what}")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise TraceError(path, f"is {kind}, not a {what}; only regular files are read")


def open_regular(path: str, limit: int, what: str = TRACE):
    """Open ``path`` for reading only if it is a regular file no larger than ``limit``. A FIFO, a
    device or a socket is refused from its stat, never opened for reading (a FIFO nobody writes
    would block); the file is then opened non-blocking and checked again, in case it was swapped.
    ``what`` names the file in the refusals: traces, and the users' pattern files, are opened here."""
    refuse_non_regular(path, os.stat(path).st_mode, what)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        refuse_non_regular(path, st.st_mode, what)
        if st.st_size > limit and what == TRACE:
            raise too_big(path, limit, f"is {human(st.st_size)},")
        if st.st_size > limit:
            raise TraceError(path, f"{what} is {st.st_size} bytes; at most {limit} are accepted")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


RATIO = 100  # text per compressed byte beyond which a gzip file is refused (kineto's: 11-18, docs/robustness.md)
MIN_INFLATED = 64 << 20  # a file of any size may inflate to this much


def inflate_bound(path: str, limit: int, compressed: int, env: str = ENV) -> tuple[int, Callable[[], TraceError]]:
    """(the most text a gzip file of ``compressed`` bytes may inflate to, the error past it): ``limit``,
    lowered to RATIO times the file (at least MIN_INFLATED) unless ``env`` sets the limit itself, so
    a file of a few KB cannot make seconds of work and gigabytes of text."""
    if compressed > 0 and not os.environ.get(env, "").strip():
        cap = max(MIN_INFLATED, RATIO * compressed)
        if cap < limit:
            return cap, lambda: TooBig(path, f"inflates to more than {human(cap)}, over {RATIO} times its "
                                             f"{human(compressed)} (a trace compresses 10-20 times: a gzip bomb?); "
                                             f"set {env} to read it anyway")
    return limit, lambda: too_big(path, limit, "inflates to")


class Cut(Exception):
    """The gzip stream ended early; ``data`` is what inflated."""

    def __init__(self, data: bytes):
        self.data = data


def gunzip(path: str, raw: bytes, zmod, limit: int) -> bytes:
    """Inflate every gzip member of ``raw`` with ``zmod`` (zlib or isal's isal_zlib), stopping as soon
    as the output passes ``limit`` (or inflate_bound's ratio). Raises TraceError (broken, too big) or
    Cut (ends early)."""
    limit, big = inflate_bound(path, limit, len(raw))
    parts: list[bytes] = []
    try:
        for out in inflate.members([raw], zmod, WHOLE_PIECE, limit, big, zero_padding=True):
            parts.append(out)
    except inflate.Broken as exc:
        raise TraceError(path, f"broken gzip stream: {exc}") from None
    except inflate.Trailing:
        raise TraceError(path, "broken gzip stream: trailing bytes after the last member") from None
    except inflate.Cut:
        raise Cut(b"".join(parts)) from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


WHOLE_PIECE = 1 << 62  # the whole-text path: a member inflates in one piece (one copy of the text, not two)
