"""`tb-attn annotate` against the analysis alone: time and peak memory on traces of growing size.

The traces replicate the real OWLv2 H100 trace (180 eager attention calls per copy) N times as N
profiler steps (bench/make_trace.py). Each measurement is a fresh process (bench/_measure.py): the
analysis alone (`analyze_file`), then `annotate` (the same analysis plus the streamed copy with the
added track, written as .json.gz). The extra memory of annotate over the analysis is what the copy
costs; it stays flat because the input is copied in 1 MiB chunks and the added events are encoded
one at a time.

    .venv/bin/python bench/annotate_speed.py --copies 1 4 16 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _measure import child_code, measure  # noqa: E402
from make_trace import replicate  # noqa: E402

SRC = os.path.join(REPO, "..", "shared", "traces", "tl_h100_owlv2_eager_bmm_softmax.json.gz")
SETUP = "from tb_attn_plugin.report.build import analyze_file\nfrom tb_attn_plugin.report.annotate import annotate"
WORK = {
    "analyze": "n = analyze_file(PATH)['calls']",
    "annotate": "got = annotate(PATH, ARGS[0]); n = got['calls']; extra = got",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    if not os.path.exists(SRC):
        print(f"needs {SRC}", file=sys.stderr)
        return 2
    print("| copies | trace MB | calls | analyze s | annotate s | analyze peak MB | annotate peak MB | output MB (.gz) | call slices |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="tb-attn-annotate-bench-") as d:
        for n in args.copies:
            path = os.path.join(d, f"owl_x{n}.json")
            replicate(SRC, n, path)
            out = os.path.join(d, f"owl_x{n}.annotated.json.gz")
            env = dict(os.environ, PYTHONPATH=REPO)
            a = measure(sys.executable, child_code(SETUP, WORK["analyze"]), path, repeat=args.repeat, cwd=REPO, env=env)
            b = measure(sys.executable, child_code(SETUP, WORK["annotate"]), path, out, repeat=args.repeat, cwd=REPO,
                        env=env)
            if "error" in a or "error" in b:
                print(f"| {n} | error: {a.get('error') or b.get('error')} |")
                continue
            print(f"| {n} | {os.path.getsize(path) / 1e6:.1f} | {a['n']} | {a['seconds']:.2f} | {b['seconds']:.2f} | "
                  f"{a['peak_growth_mb']:.0f} | {b['peak_growth_mb']:.0f} | {os.path.getsize(out) / 1e6:.1f} | "
                  f"{b['extra']['call_slices']} |", flush=True)
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
