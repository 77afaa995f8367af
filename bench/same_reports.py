"""Whether two checkouts of tb-attn give byte-identical reports: ``tb-attn report --json`` of each
trace, run once with each checkout first on PYTHONPATH, the two outputs compared byte for byte.

    python bench/same_reports.py --a /work/main --b . ../shared/traces/*.json.gz /tmp/owlv2x4.json

The one field that is a wall-clock time (``analysis_seconds``) is blanked in both first.
Prints one line per trace (same / DIFFERENT, with the first differing JSON path) and exits 1 when
any differs. An engine change that must not change results is checked with this before it lands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

_CLOCK = re.compile(rb'("analysis_seconds": )[-0-9.e]+')  # how long it took: differs run to run


def report(checkout: str, trace: str) -> bytes:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    # the trace by its absolute path: each checkout runs in its own directory, and the report names the path
    got = subprocess.run([sys.executable, "-m", "tb_attn_plugin.cli", "report", "--json", "-q", os.path.abspath(trace)],
                         env=env, capture_output=True, cwd=os.path.abspath(checkout))
    return _CLOCK.sub(rb"\1null", got.stdout) + b"\n--- stderr ---\n" + got.stderr + f"\n--- rc {got.returncode}".encode()


def first_difference(a, b, path: str = "$") -> str:
    """The JSON path where two decoded documents first differ."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'b' if k not in a else 'a'}"
            if a[k] != b[k]:
                return first_difference(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {a!r} vs {b!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="first checkout (its root goes on PYTHONPATH)")
    ap.add_argument("--b", required=True, help="second checkout")
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()
    differ = 0
    for t in args.traces:
        ra, rb = report(args.a, t), report(args.b, t)
        if ra == rb:
            print(f"same       {len(ra):>9} bytes  {t}")
            continue
        differ += 1
        try:
            where = first_difference(json.loads(ra.split(b"\n--- stderr ---\n")[0]),
                                     json.loads(rb.split(b"\n--- stderr ---\n")[0]))
        except ValueError:
            where = "output is not JSON"
        print(f"DIFFERENT  {t}: {where}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
