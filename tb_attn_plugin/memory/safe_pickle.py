"""Loading untrusted snapshot pickles: plain containers and scalars only, nothing in them runs.

``pickle`` calls any global a pickle names (``os.system`` through ``__reduce__``); this unpickler
refuses every global and persistent id, so only dicts, lists, tuples, strings, bytes, numbers,
booleans and None can come out. Each failure is one TraceError naming the file and the cause.
"""

from __future__ import annotations

import gc
import io
import os
import pickle

from ..format.errors import TraceError
from ..trace import read

ENV = "TB_ATTN_MAX_SNAPSHOT_MB"
MAX_SNAPSHOT_BYTES = 4096 << 20  # without TB_ATTN_MAX_SNAPSHOT_MB


def max_snapshot_bytes(path: str) -> int:
    """The largest snapshot read, from TB_ATTN_MAX_SNAPSHOT_MB (read at each load, so a bad value is
    one error naming the variable, never a failed import)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return MAX_SNAPSHOT_BYTES
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise TraceError(path, f"{ENV}={raw[:40]!r} is not a whole number of MiB")
    return int(raw) << 20


def check_size(path: str, size: int) -> None:
    """TraceError when ``size`` bytes are over TB_ATTN_MAX_SNAPSHOT_MB."""
    limit = max_snapshot_bytes(path)
    if size > limit:
        raise TraceError(path, f"snapshot of {size >> 20} MiB is over the {limit >> 20} MiB limit ({ENV})")


MEMO_SLACK = 1024  # as _snapshot_decode.c: memo indexes allowed beyond the objects stored so far


def _memo_scan(data: bytes):
    """(offset, index, stores) of the first memo index no pickler writes, or None (see
    _snapshot_decode.c's memo_scan; pickletools walks the opcodes where it is not built)."""
    try:
        from ._snapshot_decode import memo_scan
    except ImportError:  # no compiler at install time: the same walk in Python
        return _memo_scan_py(data)
    return memo_scan(data)


def _memo_scan_py(data: bytes):
    import pickletools

    puts = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name == "MEMOIZE":
                idx, store = puts, True
            elif op.name in ("PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"):
                idx, store = int(arg), "PUT" in op.name
            elif op.name == "STOP":
                return None
            else:
                continue
            if idx > puts + MEMO_SLACK:
                return pos, idx, puts
            puts += store
    except Exception:  # a damaged stream: the unpickler stops where this walk stopped
        return None
    return None


def check_memo(path: str, data: bytes) -> None:
    """TraceError for a memo index far beyond the objects stored before it: the unpickler would
    zero-fill a memo table as large as the index (a 9-byte pickle asking for 4 GB)."""
    bad = _memo_scan(data)
    if bad is not None:
        at, idx, puts = bad
        raise TraceError(path, f"refused: memo index {idx} at byte {at} after {puts} stored objects (a pickler "
                               "numbers them 0, 1, 2, ...); loading it would reserve memory far beyond the file's size")


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global (a class or function): loading it could run code."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise RefusedGlobal(f"{module}.{name}")

    def persistent_load(self, pid):
        raise RefusedGlobal("a persistent id")


def loads_plain(data: bytes, path: str = "<bytes>"):
    """The object in ``data``, built from plain containers and scalars only."""
    if not data:
        raise TraceError(path, "empty file (is the snapshot still being written?)")
    check_size(path, len(data))
    # Protocol 2+ pickles (every torch release writes 4 or 5) start with PROTO.
    if data[:1] != b"\x80" or data[1:2] not in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise TraceError(path, "not a pickle (a CUDA memory snapshot is written by torch.cuda.memory._dump_snapshot)")
    check_memo(path, data)
    gc_was = gc.isenabled()
    gc.disable()  # a million small dicts, none cyclic: the collector would only rescan them
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except RefusedGlobal as exc:
        raise TraceError(path, f"refused: the pickle names the global {exc}, which could run code; "
                               "a memory snapshot holds only plain data") from None
    except EOFError:
        raise TraceError(path, "truncated pickle: the file ends before the data does") from None
    except RecursionError:
        raise TraceError(path, "corrupt pickle: values nested too deeply") from None
    except MemoryError:
        raise TraceError(path, "not enough memory to load this snapshot") from None
    except Exception as exc:  # the unpickler raises many kinds for damaged data
        if "truncated" in str(exc):
            raise TraceError(path, "truncated pickle: the file ends before the data does") from None
        raise TraceError(path, f"corrupt or truncated pickle: {type(exc).__name__}: {exc}") from None
    finally:
        if gc_was:
            gc.enable()


def load_plain(path: str):
    """Read ``path`` (local, fsspec URL, optionally gzip-compressed) and load it with loads_plain."""
    path = str(path)
    try:
        size = read.file_size(path)
    except Exception:  # OSError, or a store's own error: read_bytes below words it
        size = None
    if size is not None:
        check_size(path, size)
    try:
        data = read.read_bytes(path)
    except read._Truncated:
        raise TraceError(path, "truncated: the gzip stream ends early") from None
    return loads_plain(data, path)
