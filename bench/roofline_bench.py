"""What the roofline costs: the time of the roofline section inside the engine's analysis (the
section's own time, wrapped by a timer, against the whole analysis in the same process: a ratio
that a loaded machine disturbs less than two separate timings), best of N fresh processes, and the
collector's one-time peak measurement on this machine.

    .venv/bin/python bench/roofline_bench.py                          # the OWLv2 H100 trace, BERT x128
    .venv/bin/python bench/roofline_bench.py --traces path.json.gz --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(REPO, "..", "shared", "traces")
sys.path.insert(0, HERE)
from _measure import child_code, run_once  # noqa: E402

SETUP = """
import time
import tb_attn_plugin.report.build as B
import tb_attn_plugin.report.sections as S
_spent = []
_inner = S.build_roofline
def _timed(*a, **k):
    t = time.perf_counter()
    try:
        return _inner(*a, **k)
    finally:
        _spent.append(time.perf_counter() - t)
S.build_roofline = _timed  # the sections table's row reads the module's name at call time
"""
WORK = "r = B.analyze_file(PATH)\nn = r['trace']['events']\nextra = sum(_spent)"
PEAKS = """
import json, os, sys, tempfile, time
os.environ["TB_ATTN_CACHE_DIR"] = tempfile.mkdtemp()
from tb_attn_plugin.collector import peaks
t = time.perf_counter()
got = peaks.measured_peaks("cpu")
print(json.dumps({"seconds": time.perf_counter() - t, "tflops": got["tflops"], "bandwidth_tbs": got["bandwidth_tbs"],
                  "device": got["device"], "threads": got["threads"]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", nargs="*", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    traces = args.traces
    if traces is None:
        traces = [os.path.join(SHARED, "tl_h100_owlv2_eager_bmm_softmax.json.gz")]
        rep = os.path.join(HERE, "out", "replicated_x128.json")
        if not os.path.exists(rep):
            from make_trace import replicate

            os.makedirs(os.path.dirname(rep), exist_ok=True)
            replicate(os.path.join(SHARED, "tl_h100_bert_small_sdpa_flash.json.gz"), 128, rep)
        traces.append(rep)
    env = dict(os.environ, PYTHONPATH=REPO)
    print(f"best of {args.repeat} fresh processes each; load average {os.getloadavg()[0]:.1f}\n")
    print(f"{'trace':<44} {'events':>8} {'analysis s':>10} {'roofline s':>10} {'share':>6}")
    for path in traces:
        runs = [run_once(sys.executable, child_code(SETUP, WORK), path, cwd=REPO, env=env) for _ in range(args.repeat)]
        bad = [r["error"] for r in runs if "error" in r]
        if bad:
            raise SystemExit(f"{path}: {bad[0]}")
        best = min(runs, key=lambda r: r["seconds"])
        share = min(r["extra"] / r["seconds"] for r in runs)
        print(f"{os.path.basename(path):<44} {best['n']:>8} {best['seconds']:>10.3f} {best['extra']:>10.3f} {share:>6.1%}")
    out = subprocess.run([sys.executable, "-c", PEAKS], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    p = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"\npeak measurement on this CPU ({p['device']}, {p['threads']} threads), once per machine: {p['seconds']:.2f} s; "
          f"matmul TFLOP/s {p['tflops']}, copy {p['bandwidth_tbs'] * 1000:.1f} GB/s")


if __name__ == "__main__":
    main()
