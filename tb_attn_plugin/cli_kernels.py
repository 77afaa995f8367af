"""The CLI's kernel-table parts: ``--patterns FILE`` on every command, ``tb-attn patterns``, ``tb-attn annotate``,
``tb-attn fingerprint`` (kernel names decoded by reading/fingerprint_rules.py)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading

from .text import json_text

COMMANDS = ("patterns", "annotate", "fingerprint")


def patterns_parent() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--patterns", action="append", default=[], metavar="FILE",
                   help="add kernel families from a TOML file ([[family]] rows, see docs/kernels.md); repeatable")
    return p


def add_commands(sub, common: argparse.ArgumentParser) -> None:
    pat = sub.add_parser("patterns", help="list the kernel-name table in effect (built-in rows and --patterns rows)",
                         parents=[common])
    pat.add_argument("--json", action="store_true", help="print the table as JSON")
    fpr = sub.add_parser("fingerprint", help="decode kernel names into library, pass, dtype, math unit, tile, layout, "
                                              "arch, head dim, paging, causal, knob, split; without names, list the decoding rules",
                         parents=[common])
    fpr.add_argument("names", nargs="*", metavar="KERNEL", help="kernel names as the trace writes them")
    fpr.add_argument("--device-arch", metavar="ARCH", help="the device the kernels ran on (sm90, gfx942), for the flags")
    fpr.add_argument("--json", action="store_true", help="print JSON")
    ann = sub.add_parser("annotate", help="write a copy of a trace with the analysis on its own track "
                                          "(Perfetto, chrome://tracing, PyTorch Profiler trace view)", parents=[common])
    ann.add_argument("trace", help="trace file (.json or .json.gz) or fsspec URL")
    ann.add_argument("-o", "--output", required=True, metavar="OUT.json[.gz]",
                     help="where to write the annotated trace (gzip when it ends in .gz)")
    ann.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def install_patterns(args) -> bool:
    """Load --patterns files into the table; False (after one line on stderr) when one is bad."""
    files = getattr(args, "patterns", None) or []
    if not files:
        return True
    from .attention.user_table import PatternError, install

    try:
        install(files)
    except PatternError as exc:
        print(f"tb-attn: error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):  # --json: the failure is a JSON object on stdout too
            from .cli_common import fail_json_message

            fail_json_message(str(exc), exc.path)
        return False
    return True


def run(args) -> int:
    if args.command == "patterns":
        return _patterns(args)
    if args.command == "fingerprint":
        return _fingerprint(args)
    return _annotate(args)


def _fingerprint(args) -> int:
    from msgspec.structs import asdict

    from .reading import fingerprint as F
    from .reading.fingerprint_rules import RULES

    if not args.names:
        if args.json:
            sys.stdout.write(json_text.dumps({"rules": [asdict(r) for r in RULES]}) + "\n")
            return 0
        print(f"{'field':<9} {'value':<40} pattern   (example; source)")
        for r in RULES:
            print(f"{r.field:<9} {r.value:<40} {r.pattern}\n{'':<10}e.g. {r.example[:100]}; {r.source}")
        print(f"\n{len(RULES)} rules; per field the first match wins.")
        return 0
    if args.device_arch is not None and F.arch_key(args.device_arch) is None:
        print(f"tb-attn: error: --device-arch {args.device_arch[:40]!r} is no architecture this reads "
              "(sm<N> as sm80 or sm90a, gfx<N> as gfx942)", file=sys.stderr)
        return 2
    rows = [{"name": n, **F.decode(n), "flags": F.flags(F.decode(n), args.device_arch)} for n in args.names]
    if args.json:
        sys.stdout.write(json_text.dumps({"kernels": rows}) + "\n")
        return 0
    for n, row in zip(args.names, rows):
        print(n[:120])
        print(f"  {F.summary(F.decode(n))}")
        for f in row["flags"]:
            print(f"  ! {f}")
    return 0


def _patterns(args) -> int:
    from .attention import patterns as P
    from .attention.user_table import describe

    rows = describe(P.effective_families())
    op_rows = [{"name": r.rule, "pattern": r.pattern, "role": r.role, "example": r.example, "source": r.source}
               for r in P.ATTENTION_OP_RULES]
    if args.json:
        sys.stdout.write(json_text.dumps({"families": rows, "ops": op_rows}) + "\n")
        return 0
    w = max(len(r["name"]) for r in rows)
    print(f"{'family':<{w}}  {'stage':<15} {'pass':<4} {'impl':<11} {'origin':<8} pattern")
    for r in rows:
        print(f"{r['name']:<{w}}  {r['stage']:<15} {r['pass'] or '-':<4} {r['implementation'] or '-':<11} "
              f"{r['origin']:<8} {r['pattern']}")
    print(f"\n{len(rows)} families, searched in this order (the first match wins); "
          f"{sum(r['origin'] == 'user' for r in rows)} from --patterns files.")
    w = max(len(r["name"]) for r in op_rows)
    print(f"\n{'op rule':<{w}}  {'role':<9} pattern (the whole op name; a Function's node is <name>Backward)")
    for r in op_rows:
        print(f"{r['name']:<{w}}  {r['role'] or 'exclude':<9} {r['pattern']}")
    print(f"\n{len(op_rows)} attention op rules (patterns.ATTENTION_OP_RULES), searched in this order.")
    return 0


class _Terminated(BaseException):
    """SIGTERM or SIGHUP during annotate: unwinds like Ctrl-C, so the temporary output is removed."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _terminate_as_exception():
    """A job's time limit or a closed terminal sends SIGTERM/SIGHUP, whose default action kills the
    process where it stands and leaves ``.tb-attn-annotate-*.tmp`` beside the output; raise instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_(signum, frame):
        raise _Terminated(signum)

    old = {s: signal.signal(s, raise_) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _annotate(args) -> int:
    from .cli_common import ProgressBar
    from .format.errors import TraceError
    from .report.annotate import annotate

    try:
        with _terminate_as_exception():
            got = annotate(args.trace, args.output, None if args.quiet else ProgressBar(os.path.basename(args.trace)))
    except TraceError as exc:
        print(f"tb-attn: error: {exc}", file=sys.stderr)
        return 2
    except _Terminated as exc:  # the splice removed its temporary file on the way out
        print(f"tb-attn: error: {args.output}: not written: stopped by {exc}", file=sys.stderr)
        return 128 + exc.signum
    print(f"{got['path']}: {got['call_slices']} call slices and {got['stage_slices']} stage slices on the track "
          f"'tb-attn: attention calls' (pid {got['pid']}), {got['flows']} flow arrows"
          + (f", {got['counters']} counter samples" if got["counters"] else "")
          + f"; {got['calls']} attention calls. Open it in https://ui.perfetto.dev or chrome://tracing.")
    return 0
