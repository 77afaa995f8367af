"""``tb-attn``: the command line.

    tb-attn report PATH [--json]     PATH: a trace file, a run directory or a logdir (or an fsspec URL)
    tb-attn compare A B [C ...]      runs side by side (each a trace file or a run directory)
    tb-attn sweep --logdir DIR ...   time attention backends over sequence length x batch (sweeps/cli.py)

Exit status: 0 when every trace was analysed, 2 when any could not be (one line per file on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .errors import TraceError


class ProgressBar:
    """A one-line bar on stderr, shown only once an analysis has run for more than a second."""

    def __init__(self, label: str, stream=sys.stderr, delay: float = 1.0):
        self.label, self.stream, self.delay = label, stream, delay
        self.t0 = time.monotonic()
        self.shown = False

    def __call__(self, phase: str, frac: float) -> None:
        if not self.shown and time.monotonic() - self.t0 < self.delay:
            return
        if not self.shown and not self.stream.isatty() and frac < 1.0:
            # not a terminal: one line per phase instead of redrawing
            self.stream.write(f"{self.label}: {phase}…\n")
            self.stream.flush()
            return
        self.shown = True
        width = 30
        done = int(frac * width)
        self.stream.write(f"\r{self.label[-40:]} [{'#' * done}{'.' * (width - done)}] {phase:<18}")
        if frac >= 1.0:
            self.stream.write("\n")
        self.stream.flush()


def _analyze(path: str, quiet: bool):
    """[(TraceFile, report or TraceError)] for a file, run directory or logdir; TraceError when the
    path itself is unusable."""
    from .report.build import analyze_path

    return list(analyze_path(path, None if quiet else (lambda tf: ProgressBar(os.path.basename(tf.path)))))


def _report(args) -> int:
    from .report.text import render

    status = 0
    reports = []
    try:
        items = _analyze(args.path, args.quiet)
    except TraceError as exc:
        print(f"tb-attn: error: {exc}", file=sys.stderr)
        return 2
    for tf, result in items:
        if isinstance(result, TraceError):
            print(f"tb-attn: error: {result}", file=sys.stderr)
            status = 2
            continue
        for w in result.get("warnings", []):
            print(f"tb-attn: warning: {tf.path}: {w}", file=sys.stderr)
        reports.append(result)
    if args.json:
        doc = reports[0] if len(reports) == 1 and not os.path.isdir(args.path) else {"reports": reports}
        json.dump(doc, sys.stdout, indent=None if args.compact else 1)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(render(r) for r in reports))
    return status


def _compare(args) -> int:
    from .report.compare import compare_reports
    from .report.text import render_compare

    runs = []
    for path in args.paths:
        got = None
        try:
            # A run directory may hold several workers and spans: compare the first worker's last span.
            items = _analyze(path, args.quiet)
        except TraceError as exc:
            print(f"tb-attn: error: {exc}", file=sys.stderr)
            return 2
        for tf, result in items:
            if isinstance(result, TraceError):
                print(f"tb-attn: error: {result}", file=sys.stderr)
                return 2
            if got is None or (tf.worker == got[0].worker):
                got = (tf, result)
        runs.append((os.path.basename(os.path.normpath(path)), got[1]))
    c = compare_reports(runs)
    if args.json:
        json.dump(c, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(render_compare(c))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tb-attn", description="Attention in PyTorch profiler traces.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="analyse a trace file, a run directory or a logdir")
    rep.add_argument("path", help="trace file (.json or .json.gz), run directory, logdir, or fsspec URL")
    rep.add_argument("--json", action="store_true", help="print the report as JSON (schema: report/schema.json)")
    rep.add_argument("--compact", action="store_true", help="with --json: no indentation")
    rep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    cmp_ = sub.add_parser("compare", help="compare runs: stage and layer deltas, kernels only in one run")
    cmp_.add_argument("paths", nargs="+", metavar="PATH", help="two or more trace files or run directories")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    from .sweeps import cli as sweep_cli

    sweep_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "compare" and len(args.paths) < 2:
        parser.error("compare needs at least two paths")
    try:
        if args.command == "report":
            return _report(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "sweep":
            return sweep_cli.run(args)
    except KeyboardInterrupt:
        print("tb-attn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
