"""The trace files of a logdir at an fsspec URL (s3://bucket/job/), as TraceFiles in logdir order."""

from __future__ import annotations

from . import discover
from ..errors import TraceError


def is_url_logdir(path: str) -> bool:
    """A URL that does not name a trace file itself: a logdir (or run directory) to list."""
    from .read import is_url

    return is_url(path) and not discover.ANY_TRACE.search(path.rstrip("/"))


def url_logdir(url: str) -> list[discover.TraceFile]:
    """Every trace under ``url``, sorted by run, worker and span as find_traces sorts a local logdir.
    Raises TraceError (one line) when fsspec is missing, the store cannot be listed, or nothing is there."""
    from ..plugin.layout import list_traces  # fsspec only; no TensorBoard

    try:
        found = list_traces(url)
    except ImportError:
        raise TraceError(url, "reading URLs needs fsspec: pip install 'tb-attn[remote]'") from None
    except Exception as exc:  # the store's own error types
        raise TraceError(url, f"cannot list: {type(exc).__name__}: {exc}") from None
    if not found:
        raise TraceError(url, "no trace files ({worker}.{span}.pt.trace.json[.gz]) under this URL")
    return [discover.TraceFile(f.path, f.run, f.worker, f.span)
            for f in sorted(found, key=lambda f: (f.run, f.worker, discover._span_key(f.span)))]
