"""``tb-attn report PATH --dask ADDRESS``: the CLI's analyze_path, run on a Dask cluster."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

from ..format.errors import TraceError
from ..trace import discover
from ..trace.url_logdir import is_url_logdir, url_logdir
from . import dask_jobs


def analyze_path_on_dask(path: str, client, quiet: bool = False, loose: bool = True
                         ) -> Iterator[tuple[discover.TraceFile, dict[str, Any] | TraceError]]:
    """Like report.build.analyze_path, with every file analysed on the cluster ``client`` is connected
    to (dask_jobs.connect; one client serves every path of a command)."""
    if os.path.isdir(path):
        files = discover.find_traces(path, loose=loose)
        if not files:
            raise TraceError(path, "no trace files (*.pt.trace.json[.gz] or *.json[.gz]) under this directory")
    elif is_url_logdir(path):
        files = url_logdir(path)  # s3://bucket/job/: the workers read each rank's URL themselves
    else:
        name = os.path.basename(path)
        parsed = discover.parse_name(name) or (name, "")
        files = [discover.TraceFile(path, ".", parsed[0], parsed[1])]

    tty = sys.stderr.isatty()
    said = [-1]  # the last tenth written, off a terminal

    def progress(done: int, total: int) -> None:
        if quiet:
            return
        if tty:  # one line, redrawn
            sys.stderr.write(f"\rtb-attn: {done}/{total} traces analysed on Dask")
            if done == total:
                sys.stderr.write("\n")
        else:  # a log or a pipe: whole lines only, at most one per tenth of the work
            tenth = 10 * done // max(total, 1)
            if tenth == said[0]:
                return
            said[0] = tenth
            sys.stderr.write(f"tb-attn: {done}/{total} traces analysed on Dask\n")
        sys.stderr.flush()

    results = dict(dask_jobs.analyze_many(client, [tf.path for tf in files], progress))
    for tf in files:
        yield tf, results[tf.path]

