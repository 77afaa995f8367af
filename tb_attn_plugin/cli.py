"""``tb-attn``: the command line.

    tb-attn report PATH... [--json]  each PATH: a trace file, a run directory or a logdir (or an fsspec URL),
                                     or a CUDA memory snapshot (*.pickle);
                                     a pattern such as 'runs/*/trace.json.gz' is expanded if the shell did not
    tb-attn report LOGDIR --dask ADDRESS|local   the same, each trace analysed on a Dask cluster
    tb-attn compare A B [C ...]      runs side by side (each a trace file or a run directory)
    tb-attn --version
    tb-attn annotate TRACE -o OUT    the trace with the analysis on its own track (Perfetto, chrome://tracing)
    tb-attn patterns                 the kernel-name table in effect
    tb-attn sweep --logdir DIR ...   time attention backends over sequence length x batch (sweeps/cli.py)

Every command takes ``--patterns FILE`` (repeatable): kernel families added from TOML (docs/kernels.md).

Exit status: 0 when every trace was analysed, 2 when any could not be (one line per file on stderr;
with --json also a JSON object with "error" on stdout).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import glob
import os
import sys

from .text import json_text
from .cli_common import ProgressBar, fail_json_message
from .format.errors import TraceError


# What every command but a sweep sets in its process's environment before numpy is imported, where the
# user has not set it. OPENBLAS_NUM_THREADS: only a sweep's torch multiplies matrices, and numpy's
# OpenBLAS starts a thread per core on import, which then spin a while on the cores that reading a
# trace uses; with one, numpy imports in about half the time, the results the same.
# NUMPY_MADVISE_HUGEPAGE: numpy asks the kernel for huge pages for each array of 4 MB or more; where
# transparent huge pages are "madvise" (Debian's and Ubuntu's default), a report's big columns, each
# alive for a few ms, then cost more system time than they save: tb-attn report on the 2 GB .gz trace
# took 1.12 against 1.64 s of it and 6.46 against 6.74 s of wall time (medians of 5 pairs), the same
# on OWLv2 x4 (bench/README.md).
COMMAND_ENV = {"OPENBLAS_NUM_THREADS": "1", "NUMPY_MADVISE_HUGEPAGE": "0"}


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off meanwhile: importing the engine (numpy with it) makes tens of
    thousands of objects, none of them garbage, and the collections they set off were about a tenth of
    the import's CPU time (8 of 94 ms here). Only around imports: an analysis that fails leaves cycles
    (its traceback's frames) that must still be collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _import_engine() -> None:
    """The engine's modules, imported with the collector paused (whichever command needs them first)."""
    with _collector_paused():
        from .memory import cli_paths, fast_pickle  # noqa: F401
        from .report import build  # noqa: F401


def _analyze(path: str, quiet: bool, dask=None):
    """[(TraceFile, report or TraceError)] for a file, run directory or logdir; TraceError when the
    path itself is unusable. ``dask``: a connected Dask client to analyse on."""
    _import_engine()
    from .memory.cli_paths import snapshot_items
    from .report.build import analyze_path

    snapshots = snapshot_items(path)  # a snapshot pickle, or a directory of snapshots without traces
    if snapshots is not None:
        return snapshots
    if dask is not None:
        from .cluster.cli_support import analyze_path_on_dask

        return list(analyze_path_on_dask(path, dask, quiet))

    return list(analyze_path(path, None if quiet else (lambda tf: ProgressBar(os.path.basename(tf.path)))))


def _expand(paths: list[str]) -> tuple[list[str], list[TraceError]]:
    """The paths to analyse: each as given, or a pattern's matches (sorted) when the shell left it
    unexpanded; an empty argument or a pattern matching nothing is an error of its own."""
    from .trace.read import is_url

    out, errors = [], []
    for p in paths:
        if not p.strip():
            errors.append(TraceError(repr(p), "empty path argument (a shell variable that expanded to nothing?)"))
        elif not is_url(p) and not os.path.exists(p) and glob.has_magic(p):
            found = sorted(glob.glob(p, recursive=True))
            out.extend(found) if found else errors.append(TraceError(p, "no file or directory matches this pattern"))
        else:
            out.append(p)
    return out, errors


def _fail_json(errors: list[TraceError], **extra) -> None:
    """With --json, failures are a JSON object too: {"error": first message, "errors": [{path, error}]}."""
    doc = dict(extra)
    if "reports" not in doc:
        doc["error"] = str(errors[0])
    doc["errors"] = [{"path": e.path, "error": str(e)} for e in errors]
    sys.stdout.write(json_text.dumps(doc) + "\n")


def native_status() -> tuple[bool, str]:
    """(whether the native event scanner is built, a line saying which native parts are)."""
    _import_engine()
    from .memory import fast_pickle
    from .trace import native

    parts = [f"native event scanner {'built' if native.available else 'NOT built'}",
             f"snapshot decoder {'built' if fast_pickle.available() else 'NOT built'}"]
    return native.available, ", ".join(parts)


def _warn_without_native() -> None:
    """Once per command: an install without a C compiler analyses about 2x slower (bench/README.md)."""
    built, line = native_status()
    if not built:
        print(f"tb-attn: warning: {line}: analysis runs about 2x slower (reinstall with a C compiler: "
              "pip install --force-reinstall --no-deps tb-attn)", file=sys.stderr)


def _read_ahead(path: str) -> None:
    """The first trace's reading and scanning begun at once, on threads of their own, so that the
    engine's import (numpy's, a tenth of a second or more) overlaps it: analysing the trace then
    takes over what was scanned meanwhile (trace/stream.py's start). Plain local trace files only."""
    if path.endswith((".json", ".json.gz")) and os.path.isfile(path):
        from .attention.patterns import needs_shapes  # what analyze_file reads shapes by (numpy-free)
        from .trace import stream

        stream.start(path, needs_shapes)


def _report(args) -> int:
    paths, errors = _expand(args.paths)
    if paths and args.dask is None:
        _read_ahead(paths[0])
        _warn_without_native()
    client = None
    if args.dask is not None and paths:
        from .cluster import dask_jobs
        from .cluster.dask_jobs import DaskUnavailable

        try:
            client = dask_jobs.connect(args.dask)  # one cluster for every path given
        except DaskUnavailable as exc:  # --dask without dask installed, or no scheduler at that address
            print(f"tb-attn: error: {exc}", file=sys.stderr)
            if args.json:
                fail_json_message(str(exc))
            return 2
    reports = []
    items_all = []
    try:
        for path in paths:
            try:
                items = _analyze(path, args.quiet, client)
            except TraceError as exc:
                errors.append(exc)
                continue
            items_all.extend(items)
            for tf, result in items:
                if isinstance(result, TraceError):
                    errors.append(result)
                    continue
                for w in result.get("warnings", []):
                    print(f"tb-attn: warning: {tf.path}: {w}", file=sys.stderr)
                reports.append(result)
    finally:
        if client is not None:
            dask_jobs.close(client)
        from .trace import stream

        stream.stop_begun()  # a reading _read_ahead began for a path that was not analysed as a trace
    from .ranks.runs import rank_summaries

    ranks = rank_summaries(items_all)  # runs whose traces are ranks of one job
    for exc in errors:
        print(f"tb-attn: error: {exc}", file=sys.stderr)
    ranks_doc = {"ranks": [{"run": run, **summary} for run, summary in ranks]} if ranks else {}
    if args.json:
        if errors:
            _fail_json(errors, **({"reports": reports, **ranks_doc} if reports else {}))
        else:
            # One shape whatever was given (a file, a directory, several): the reports in a list.
            doc = {"reports": reports, **ranks_doc}
            sys.stdout.write(json_text.dumps(doc, None if args.compact else 1) + "\n")
    elif reports:
        from .memory.text import render_snapshot_report
        from .ranks.text import render_ranks
        from .report.text import render

        print("\n\n".join([render_snapshot_report(r) if r.get("kind") == "memory_snapshot" else render(r)
                           for r in reports] + [render_ranks(run, s) for run, s in ranks]))
    return 2 if errors else 0


def _labels(paths: list[str]) -> list[str]:
    """A distinct label per compared input: the base name, more of the path where two share it, and
    a number where two are the same path."""
    parts = [os.path.normpath(p).replace("\\", "/").split("/") for p in paths]
    labels = []
    for i, p in enumerate(parts):
        depth = 1
        while depth < len(p) and sum(1 for q in parts if q[-depth:] == p[-depth:]) > 1 and \
                any(q != p and q[-depth:] == p[-depth:] for q in parts):
            depth += 1
        labels.append("/".join(p[-depth:]) or paths[i])
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if labels.count(label) == 1 else f"{label} ({seen[label]})")
    return out


def _compare(args) -> int:
    from .report.compare import compare_reports
    from .report.spans import is_empty, pick_latest
    from .report.text import render_compare

    paths, errors = _expand(args.paths)
    runs = []
    for path, label in zip(paths, _labels(paths)):
        try:
            items = _analyze(path, args.quiet)
        except TraceError as exc:
            errors.append(exc)
            continue
        failed = [r for _, r in items if isinstance(r, TraceError)]
        if failed:
            errors.extend(failed)
            continue
        names = sorted({tf.run for tf, _ in items})
        if len(names) > 1:
            # A logdir: which of its runs would be meant is a guess, so say so instead of taking one.
            shown = ", ".join(names[:5]) + (f", … ({len(names)} in all)" if len(names) > 5 else "")
            errors.append(TraceError(path, f"holds {len(names)} runs ({shown}); compare takes trace files or run "
                                           f"directories: name the runs, e.g. {os.path.join(path, names[0])}"))
            continue
        # One run of several workers or spans: the first worker's latest span that recorded
        # something (not an empty tail window), and say which.
        first = items[0][0].worker
        mine = [(tf, r) for tf, r in items if tf.worker == first]
        tf, result = pick_latest(mine, lambda item: is_empty(item[1]))
        if len(items) > 1:
            later = len(mine) - 1 - [t for t, _ in mine].index(tf)
            which = "latest span" + (f" that recorded something; {later} later recorded nothing" if later else "")
            print(f"tb-attn: note: {path}: comparing {os.path.basename(tf.path)} (worker {first}, {which}) "
                  f"of its {len(items)} trace files", file=sys.stderr)
        for w in result.get("warnings", []):
            print(f"tb-attn: warning: {tf.path}: {w}", file=sys.stderr)
        runs.append((label, result))
    for exc in errors:
        print(f"tb-attn: error: {exc}", file=sys.stderr)
    if errors:
        if args.json:
            _fail_json(errors)
        return 2
    if len(runs) < 2:
        print("tb-attn: error: compare needs at least two runs", file=sys.stderr)
        return 2
    c = compare_reports(runs)
    if args.json:
        sys.stdout.write(json_text.dumps(c) + "\n")
    else:
        print(render_compare(c))
        warned = [(label, w) for label, r in runs for w in r.get("warnings", [])]
        for label, w in warned:  # on stdout too: a side cut short must not look like a complete run
            print(f"  warning: {label}: {w}")
    return 0


def _usage_error(subparser: argparse.ArgumentParser, message: str) -> int:
    """The subcommand's usage, then one ``tb-attn: error:`` line, as every other error; exit status 2.
    A subcommand with its own error() (sweep: one line) says it its way."""
    if "error" in vars(subparser):
        subparser.error(message)
    subparser.print_usage(sys.stderr)
    print(f"tb-attn: error: {message}", file=sys.stderr)
    return 2


class _Version(argparse._VersionAction):
    """--version, its line made only when asked for: native_status imports the engine (numpy with it),
    which no other command should wait for before its arguments are read."""

    def __call__(self, parser, namespace, values, option_string=None):
        from .format.version import ENGINE_VERSION, SCHEMA_VERSION, __version__

        self.version = (f"tb-attn {__version__} (engine {ENGINE_VERSION}, report schema {SCHEMA_VERSION}; "
                        f"{native_status()[1]})")
        super().__call__(parser, namespace, values, option_string)


def _install_roof(given: str | None) -> bool:
    """--roof FILE (else TB_ATTN_ROOF): checked before any analysis, one line and exit 2 when unusable;
    the analysis (in this process or its workers) reads it from TB_ATTN_ROOF."""
    from .roofline.roof import OVERRIDE_ENV, load_override

    path = given or os.environ.get(OVERRIDE_ENV)
    if not path:
        return True
    try:
        load_override(path)
    except ValueError as e:
        print(f"tb-attn: error: {path}: {e}", file=sys.stderr)
        return False
    os.environ[OVERRIDE_ENV] = path
    return True


def main(argv: list[str] | None = None, own_process: bool = False) -> int:
    """``own_process``: the process is this command's alone (run()), so it may tune its allocator."""
    from . import cli_kernels

    # Raw: the --version line is printed as written, not wrapped at the terminal's width.
    parser = argparse.ArgumentParser(prog="tb-attn", description="Attention in PyTorch profiler traces.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    common = cli_kernels.patterns_parent()
    rep = sub.add_parser("report", help="analyse a trace file, a run directory or a logdir", parents=[common])
    rep.add_argument("paths", nargs="+", metavar="PATH",
                     help="trace file (.json or .json.gz), run directory, logdir, fsspec URL, or a pattern")
    rep.add_argument("--json", action="store_true", help="print the report as JSON (schema: report/schema.json)")
    rep.add_argument("--compact", action="store_true", help="with --json: no indentation")
    rep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    rep.add_argument("--dask", metavar="ADDRESS", help="analyse the traces on the Dask scheduler at ADDRESS "
                     "(tcp://host:8786), or 'local' for a LocalCluster on this machine's cores (pip install 'tb-attn[dask]')")
    cmp_ = sub.add_parser("compare", help="compare runs: stage and layer deltas, kernels only in one run",
                          parents=[common])
    cmp_.add_argument("paths", nargs="+", metavar="PATH", help="two or more trace files or run directories")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    for p in (rep, cmp_):
        p.add_argument("--roof", metavar="FILE", help="read the traces against this roof (JSON written by python -m "
                       "tb_attn_plugin.collector.peaks --out FILE) instead of the one stored in them; same as "
                       "TB_ATTN_ROOF=FILE")
    cli_kernels.add_commands(sub, common)
    from .sweeps import cli as sweep_cli

    sweep_cli.add_parser(sub, [common])  # --patterns reaches the reports of --profile cells
    args, unknown = parser.parse_known_args(argv)
    if args.command != "sweep":
        for key, value in COMMAND_ENV.items():  # before numpy's import (the engine's, in the command)
            os.environ.setdefault(key, value)
        if own_process:  # not for a sweep: torch's threads allocate as they time the backends
            _one_malloc_arena()
    # A mistake in a subcommand's arguments gets that subcommand's usage, not the top-level one.
    if unknown:
        return _usage_error(sub.choices[args.command], f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "compare" and len(args.paths) < 2:
        return _usage_error(cmp_, "compare needs at least two paths")
    if not _install_roof(getattr(args, "roof", None)):
        return 2
    try:
        if not cli_kernels.install_patterns(args):
            return 2
        if args.command in cli_kernels.COMMANDS:
            return cli_kernels.run(args)
        if args.command == "report":
            return _report(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "sweep":
            return sweep_cli.run(args)
    except KeyboardInterrupt:
        print("tb-attn: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        message = "out of memory (set TB_ATTN_MAX_TRACE_BYTES to refuse traces this large before reading them)"
        print(f"tb-attn: error: {message}", file=sys.stderr)
        if getattr(args, "json", False):
            try:
                fail_json_message(message)
            except MemoryError:
                pass
        return 2
    except BrokenPipeError:
        return 0
    return 2


def run() -> None:
    """The program (``tb-attn``, ``python -m tb_attn_plugin``): main() in a process of its own (one
    malloc arena for a command that reads traces), then the exit. Before it, every
    object is frozen out of the collector's reach: the interpreter's shutdown runs a last full
    collection over all that is still alive (numpy's modules, the engine's tables), about 20 ms of
    the CPU time of a 30 MB trace's report, to free memory the process is about to hand back."""
    code = main(own_process=True)
    gc.freeze()
    sys.exit(code)


def _one_malloc_arena() -> None:
    """glibc's malloc gives each thread that allocates an arena of its own, and keeps what is freed in
    an arena for that arena's later use: the scanning thread's windows and buffers (a few MB each,
    freed chunk after chunk) then stay resident beside the caller's memory, which cannot use them
    (OWLv2 x4: 126 MiB peak, 120 MiB with one arena, the CPU time the same). One arena for every
    thread, set before any starts; elsewhere than glibc (no mallopt) nothing changes."""
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX (glibc's malloc.h), 1
    except (OSError, AttributeError, TypeError):  # no C library by that name, no mallopt
        pass


if __name__ == "__main__":
    run()
