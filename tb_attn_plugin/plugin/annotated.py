"""The /annotated route: a run's trace with tb-attn's analysis on its own track, streamed as a download.

The copy is written by a worker process (work.annotate) into a private temporary directory, never
into the logdir, sent in chunks, and deleted once the response is closed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from werkzeug import wrappers
from werkzeug.wsgi import wrap_file

from . import work

TIMEOUT_S = 900.0
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def download_name(display: str) -> str:
    base = os.path.basename(display.replace("\\", "/")) or "trace"
    for suffix in (".json.gz", ".json"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return (_UNSAFE.sub("_", base).strip("._") or "trace")[:150] + ".tb-attn.json.gz"


def respond(request, entry, pool, error):
    """``error(code, message)`` builds the plugin's ApiError."""
    tmpdir = tempfile.mkdtemp(prefix="tb-attn-annotated-")
    out = os.path.join(tmpdir, "annotated.json.gz")
    try:
        status, message = pool.call(work.annotate, entry.path, out).result(timeout=TIMEOUT_S)
    except Exception as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise error(503, f"{entry.display}: cannot annotate now ({type(exc).__name__}); try again") from None
    if status != "ready":
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise error(422, f"{entry.display}: {message}")
    fh = open(out, "rb")
    size = os.fstat(fh.fileno()).st_size
    resp = wrappers.Response(wrap_file(request.environ, fh, buffer_size=1 << 20), mimetype="application/gzip",
                             direct_passthrough=True)
    resp.headers["Content-Length"] = str(size)
    resp.headers["Content-Disposition"] = f'attachment; filename="{download_name(entry.display)}"'
    resp.headers["X-Content-Type-Options"] = "nosniff"  # as http_util.Respond sets on every other answer

    def cleanup():
        fh.close()
        shutil.rmtree(tmpdir, ignore_errors=True)

    resp.call_on_close(cleanup)
    return resp
