"""``tb-attn report PATH --dask ADDRESS``: the CLI's analyze_path, run on a Dask cluster."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

from ..errors import TraceError
from ..trace import discover
from ..trace.read import is_url
from . import dask_jobs


def analyze_path_on_dask(path: str, address: str, quiet: bool = False, loose: bool = True
                         ) -> Iterator[tuple[discover.TraceFile, dict[str, Any] | TraceError]]:
    """Like report.build.analyze_path, with every file analysed on the cluster at ``address``."""
    if os.path.isdir(path):
        files = discover.find_traces(path, loose=loose)
        if not files:
            raise TraceError(path, "no trace files (*.pt.trace.json[.gz] or *.json[.gz]) under this directory")
    elif is_url(path) and not discover.ANY_TRACE.search(path):
        files = _url_logdir(path)  # s3://bucket/job/: the workers read each rank's URL themselves
    else:
        name = os.path.basename(path)
        parsed = discover.parse_name(name) or (name, "")
        files = [discover.TraceFile(path, ".", parsed[0], parsed[1])]

    def progress(done: int, total: int) -> None:
        if not quiet:
            sys.stderr.write(f"\rtb-attn: {done}/{total} traces analysed on Dask")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    client = dask_jobs.connect(address)
    try:
        results = dict(dask_jobs.analyze_many(client, [tf.path for tf in files], progress))
    finally:
        dask_jobs.close(client)
    for tf in files:
        yield tf, results[tf.path]


def _url_logdir(url: str) -> list[discover.TraceFile]:
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
