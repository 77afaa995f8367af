"""Bytes of a trace file: local paths and fsspec URLs, plain or gzip-compressed.

The whole (decompressed) document is held once as ``bytes``; the decoder keeps views into it
rather than copies, so this is the one big allocation of an analysis.
"""

from __future__ import annotations

import os
import zlib

from ..format.errors import TraceError
from . import limits

try:  # optional (pip install 'tb-attn[fast]'): ISA-L inflates gzip in about 60% of zlib's time
    from isal import igzip as _fast_gzip
    from isal import isal_zlib as _fast_zlib
except ImportError:
    _fast_gzip = _fast_zlib = None

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz", ".json", ".json.gz")


def is_url(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def _open_url(url: str):
    try:
        import fsspec  # optional: only URLs need it
    except ImportError:
        raise TraceError(url, "reading URLs needs fsspec: pip install 'tb-attn[remote]'") from None
    try:
        return fsspec.open(url, "rb").open()
    except FileNotFoundError:
        raise TraceError(url, "no such file") from None
    except Exception as exc:  # fsspec backends raise their own types
        raise TraceError(url, f"cannot open: {type(exc).__name__}: {exc}") from None


def file_size(path: str) -> int:
    if is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(path)
        return int(fs.size(p))
    return os.path.getsize(path)


def read_bytes(path: str) -> bytes:
    """Return the decompressed JSON text of ``path``; raise TraceError with a one-line cause."""
    path = str(path)
    limit = limits.max_trace_bytes(path)
    try:
        if is_url(path):
            with _open_url(path) as fh:
                raw = fh.read(limit + 1)
            if len(raw) > limit:
                raise limits.too_big(path, limit, "is")
        else:
            with limits.open_regular(path, limit) as fh:  # FIFOs, devices, sockets: refused, never read
                raw = fh.read()
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise TraceError(path, "empty file (is the trace still being written?)")
    if raw[:2] == b"\x1f\x8b":
        return _gunzip(path, raw, limit)
    return raw


def _gunzip(path: str, raw: bytes, limit: int) -> bytes:
    # Inflated member by member up to the limit, so a gzip bomb stops there instead of filling memory.
    if _fast_gzip is not None:
        try:
            return limits.gunzip(path, raw, _fast_zlib, limit)
        except limits.TooBig:
            raise
        except Exception:
            pass  # cut short or broken: the standard library's errors say which, below
    try:
        return limits.gunzip(path, raw, zlib, limit)
    except limits.Cut as cut:
        # A gzip stream cut short (a trace still being written, a partial copy): keep what inflates.
        if not cut.data:
            raise TraceError(path, "gzip stream ends early and holds no data") from None
        raise _Truncated(cut.data) from None


class _Truncated(Exception):
    """Internal: the gzip stream ended early; ``data`` is what could be inflated."""

    def __init__(self, data: bytes):
        self.data = data


def read_trace_text(path: str) -> tuple[bytes, list[str]]:
    """Like read_bytes, but a gzip stream cut short yields its prefix and a warning."""
    try:
        return read_bytes(path), []
    except _Truncated as t:
        return t.data, ["gzip stream ends early (trace still being written, or a partial copy)"]
