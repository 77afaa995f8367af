"""One trace file in, one compact report (a JSON-ready dict; its format: format/report/) out.

The pipeline reads in data order: read -> decode -> link -> detect -> measure -> name the calls ->
Analysis -> the report's sections (report/sections.py), one after the other.

The report stays plain dicts (the format's Structs are checked against real reports in
tests/test_format_generated.py): a new key written without its field in format/report/ fails the
tests, not a user's analysis.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, Callable

from ..attention import naming
from ..attention.detect import detect
from ..attention.metrics import measure
from ..attention.patterns import needs_shapes
from ..roofline.devices import describe
from ..trace import discover, stream
from ..trace.events import decode
from ..trace.link import link
from ..trace.read import read_trace_text
from . import finite, layers, run
from .analysis import Analysis
from .sections import assemble

Progress = Callable[[str, float], None]


def analyze_file(path: str, progress: Progress | None = None, keep: dict | None = None,
                 snapshots: list[str] | None = None) -> dict[str, Any]:
    """Analyse one trace file (local path or fsspec URL). Raises TraceError on unusable input.
    ``keep``, when given, receives the linked trace and the calls (``tb-attn annotate`` reads them).
    ``snapshots``: the memory snapshots that join it; None finds them beside the trace (the plugin
    passes the ones its listing found, so that only files inside the logdir are ever read)."""
    say = progress or (lambda phase, frac: None)
    path = str(path)
    gc_was = gc.isenabled()
    gc.disable()  # millions of small objects, none cyclic: the collector would only rescan them
    try:
        t0 = time.perf_counter()
        say("reading", 0.0)
        # Streamed through the scanner when the file is plainly laid out (the whole text is never
        # held); else, or without the scanner, the whole text is read and judged the careful way.
        streamed = stream.decode_file(path, needs_shapes, lambda f: say("reading", 0.6 * f))
        if streamed is not None:
            (ev, size), gzip_cut = streamed, False
        else:
            text, warnings = read_trace_text(path)  # its only warnings are about a gzip stream cut short
            gzip_cut = bool(warnings)
            size = len(text)
            say("decoding", 0.15)
            ev = decode(path, text, warnings, keep_shapes=needs_shapes)
            del text
        say("linking", 0.6)
        L = link(ev)
        ev.op_table = ev.gpu_table = None  # read by link alone (kernel_reading reads the launches' correlation ids)
        say("finding attention", 0.75)
        calls, call_of = detect(L)
        say("measuring", 0.85)
        m = measure(L, calls, call_of)
        naming.complete(L, calls, m.stage_of)  # layer names, types and shapes where tags gave none
        has_gpu = bool(L.kernels)
        a = Analysis(path=path, size=size, ev=ev, L=L, calls=calls, call_of=call_of, m=m,
                     totals=layers.totals(L, calls, call_of, m, has_gpu),
                     # Runtime launches come from CUPTI/roctracer only: a GPU was there even when no kernel was kept.
                     device=describe(ev.device_properties, has_gpu or len(ev.launch_table) > 0), has_gpu=has_gpu,
                     metadata=ev.tb_attn if isinstance(ev.tb_attn, dict) else {},
                     warnings=run.first_warnings(ev, calls), snapshots=snapshots)
        say("memory", 0.95)  # the progress bar's last phase: the sections, memory among them
        report = assemble(a)
        if keep is not None:
            keep.update(L=L, calls=calls, call_of=call_of, measured=m, events=ev)
        report["trace"]["truncated"] = gzip_cut or ev.truncated
        report["analysis_seconds"] = round(time.perf_counter() - t0, 4)
        finite.scrub(report)
        say("done", 1.0)
        return report
    finally:
        if gc_was:
            gc.enable()


def analyze_path(path: str, progress_for: Callable[[discover.TraceFile], Progress] | None = None, loose: bool = True):
    """Yield (TraceFile, report or TraceError) for a file, a run directory or a logdir.
    ``progress_for(trace_file)`` gives each file its own progress callback."""
    from ..format.errors import TraceError

    from ..trace.url_logdir import is_url_logdir, url_logdir

    if os.path.isdir(path):
        files = discover.find_traces(path, loose=loose)
        if not files:
            raise TraceError(path, "no trace files (*.pt.trace.json[.gz] or *.json[.gz]) under this directory")
    elif is_url_logdir(path):
        files = url_logdir(path)  # s3://bucket/job/: listed as a local logdir is, each rank's URL read in turn
    else:
        name = os.path.basename(path)
        parsed = discover.parse_name(name) or (name, "")
        files = [discover.TraceFile(path, ".", parsed[0], parsed[1])]
    for tf in files:
        try:
            yield tf, analyze_file(tf.path, progress_for(tf) if progress_for else None)
        except TraceError as exc:
            yield tf, exc
        except MemoryError:  # what was allocated is freed as the frames unwind: the next file still runs
            yield tf, TraceError(tf.path, "not enough memory to analyse this trace (set TB_ATTN_MAX_TRACE_BYTES "
                                          "lower to refuse such files before reading them)")
