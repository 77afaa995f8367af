"""The trace files of a logdir at an fsspec URL (s3://bucket/job/), as TraceFiles in logdir order."""

from __future__ import annotations

import datetime as _dt
import posixpath

from ..format.errors import TraceError
from . import discover


def is_url_logdir(path: str) -> bool:
    """A URL that does not name a trace file itself: a logdir (or run directory) to list."""
    from .read import is_url

    return is_url(path) and not discover.ANY_TRACE.search(path.rstrip("/"))


def url_logdir(url: str) -> list[discover.TraceFile]:
    """Every trace under ``url``, sorted by run, worker and span as find_traces sorts a local logdir.
    Raises TraceError (one line) when fsspec is missing, the store cannot be listed, or nothing is there."""
    try:
        found = list_url(url)
    except ImportError:
        raise TraceError(url, "reading URLs needs fsspec: pip install 'tb-attn[remote]'") from None
    except Exception as exc:  # the store's own error types
        raise TraceError(url, f"cannot list: {type(exc).__name__}: {exc}") from None
    if not found:
        raise TraceError(url, "no trace files (*.pt.trace.json[.gz]) under this URL")
    return [discover.TraceFile(path, run, worker, span)
            for run, worker, span, path, _, _ in sorted(found, key=lambda f: (f[0], f[1], discover._span_key(f[2])))]

def list_url(logdir: str) -> list[tuple[str, str, str, str, int, float]]:
    """(run, worker, span, URL, size, mtime) of every trace file under an fsspec URL, named as the
    local listing names them (hidden parts skipped, nothing above the root). The plugin's listing
    (plugin/layout.py) and the CLI's share it. Raises ImportError without fsspec, or the store's error."""
    import fsspec  # only object-storage logdirs need it

    fs, root = fsspec.core.url_to_fs(logdir)
    root = root.rstrip("/")
    # Object stores cache listings per instance; live training adds files, so always ask again.
    fs.invalidate_cache()
    found = []
    for path, info in fs.find(root, detail=True, withdirs=False).items():
        rel = posixpath.relpath(path, root) if root else path
        if rel.startswith("..") or any(part.startswith(".") for part in rel.split("/")):
            continue
        parsed = discover.trace_name(posixpath.basename(path))
        if parsed is None:
            continue
        run = posixpath.dirname(rel) or "."
        if max(len(run), len(parsed[0]), len(parsed[1])) > discover.MAX_NAME:
            continue
        found.append((run, parsed[0], parsed[1], fs.unstrip_protocol(path), int(info.get("size") or 0), mtime_of(info)))
    return found


def mtime_of(info: dict) -> float:
    """Modification time from an fsspec info dict; each backend spells it differently."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified", "created"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, _dt.datetime):
            return v.timestamp() if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc).timestamp()
        if isinstance(v, str):
            try:
                return _dt.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0
