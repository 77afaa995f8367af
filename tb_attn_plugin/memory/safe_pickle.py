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

from ..errors import TraceError
from ..trace import read

MAX_SNAPSHOT_BYTES = int(os.environ.get("TB_ATTN_MAX_SNAPSHOT_MB", "4096")) << 20


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
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise TraceError(path, f"snapshot of {len(data) >> 20} MiB is over the {MAX_SNAPSHOT_BYTES >> 20} MiB limit "
                               "(TB_ATTN_MAX_SNAPSHOT_MB)")
    # Protocol 2+ pickles (every torch release writes 4 or 5) start with PROTO.
    if data[:1] != b"\x80" or data[1:2] not in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise TraceError(path, "not a pickle (a CUDA memory snapshot is written by torch.cuda.memory._dump_snapshot)")
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
    except OSError:
        size = None
    except Exception:
        size = None
    if size is not None and size > MAX_SNAPSHOT_BYTES:
        raise TraceError(path, f"snapshot of {size >> 20} MiB is over the {MAX_SNAPSHOT_BYTES >> 20} MiB limit "
                               "(TB_ATTN_MAX_SNAPSHOT_MB)")
    try:
        data = read.read_bytes(path)
    except read._Truncated:
        raise TraceError(path, "truncated: the gzip stream ends early") from None
    return loads_plain(data, path)
