"""The fuzz harness's long mode: tests/fuzz_cases.py's cases by the thousand, counted instead of stopped.

    TB_ATTN_FUZZ_CASES=100000 nice -n 19 .venv-test/bin/python scripts/fuzz_long.py --out fuzz_counts.json

Runs CLI cases (seeds from --start) in this process, and every --http-every cases one batch of
--http-batch cases' files as a logdir under the real TensorBoard app, requesting every route of every
run. Writes the counts (cases, requests, and problems by class: traceback, nonfinite, hang, 5xx,
abspath, ...) to --out after each batch, and the first examples of each class, so a run stopped at
any time has its figures. docs/robustness.md has the last counts. CI runs the same cases in a short
mode (tests/test_fuzz_harness.py: test_structured_cases_*).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz_cases import http_requests, judge_http, place_http_batch, run_and_judge  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=int(os.environ.get("TB_ATTN_FUZZ_CASES", "100000")))
    ap.add_argument("--start", type=int, default=1_000_000, help="first seed (CI's short mode uses 0..)")
    ap.add_argument("--http-every", type=int, default=400)
    ap.add_argument("--http-batch", type=int, default=40)
    ap.add_argument("--out", default="fuzz_counts.json")
    args = ap.parse_args()

    counts: Counter = Counter()
    examples: dict[str, list[str]] = {}
    t0 = time.time()

    def note(problems: list[str], where: str) -> None:
        for p in problems:
            kind = p.split(":", 1)[0]
            counts[kind] += 1
            examples.setdefault(kind, [])
            if len(examples[kind]) < 5:  # with the seed, so that tests/fuzz_cases.make_case(seed) replays it
                examples[kind].append(f"{where}: {p[:600]}")

    def save() -> None:
        doc = {"cli_cases": counts["cli_cases"], "http_cases": counts["http_cases"],
               "http_requests": counts["http_requests"], "seconds": round(time.time() - t0),
               "problems": {k: v for k, v in counts.items() if not k.startswith(("cli_", "http_"))},
               "examples": examples, "first_seed": args.start}
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, args.out)

    seed = args.start
    while counts["cli_cases"] + counts["http_cases"] < args.cases:
        note(run_and_judge(seed), f"seed {seed}")
        counts["cli_cases"] += 1
        seed += 1
        if counts["cli_cases"] % args.http_every == 0:
            note(http_batch(list(range(seed, seed + args.http_batch)), counts), f"seeds {seed}-{seed + args.http_batch - 1}")
            seed += args.http_batch
            save()
    save()
    print(json.dumps({k: v for k, v in counts.items()}))
    return 0


def http_batch(seeds: list[int], counts: Counter) -> list[str]:
    from tests.conftest import all_settled, make_tb_app, wait_runs

    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tb-attn-fuzz-http-") as tmp:
        root = Path(tmp) / "logdir"
        runs = place_http_batch(seeds, root)
        client, plugins = make_tb_app(root, Path(tmp) / "cache")
        try:
            try:
                wait_runs(client, lambda d: all_settled(d, list(runs)), timeout=900)
            except AssertionError as exc:
                problems.append(f"hang: the logdir's runs did not settle: {str(exc)[:300]}")
            for url in http_requests(sorted(runs), random.Random(seeds[0])):
                r = client.get(f"/data/plugin/tb_attn/{url}")
                counts["http_requests"] += 1
                problems += judge_http(url, r.status_code, r.headers, r.data, [tmp])
        finally:
            plugins["tb_attn"].close()
    counts["http_cases"] += len(seeds)
    return problems


if __name__ == "__main__":
    # SIGTERM as SIGINT: the open plugin's finally closes it, which terminates its worker processes
    # (a worker busy with a hostile case would otherwise run on after this process).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
