"""The fuzz harness's long mode: tests/fuzz_cases.py's and tests/fuzz_hostile.py's cases by the thousand,
counted instead of stopped.

    TB_ATTN_FUZZ_CASES=100000 nice -n 19 .venv-test/bin/python scripts/fuzz_long.py --out fuzz_counts.json
    ... --resume        # go on from where a stopped run's --out left off (its seeds and counts)

Runs, in this process, one value-mutation CLI case (tests/fuzz_cases.py) and one hostile-structure case
(tests/fuzz_hostile.py: bent Input Dims, adversarial names, gzip member splits, memo tricks, shared
references, hostile sweep.jsonl, FIFOs; each judged by the time and memory per input byte oracle too)
in turn, and every --http-every cases one batch of --http-batch cases' files as a logdir under the
real TensorBoard app, requesting every route of every run. Writes the counts (cases by class, requests,
problems by class and kind: traceback, nonfinite, hang, slow, memory, 5xx, ...) to --out every
--save-every cases and at the end, with the first examples of each kind, so a run stopped at any time
(SIGINT or SIGTERM: the counts are saved, the plugin's workers stopped, exit 130) has its figures.
docs/robustness.md has the last counts. CI runs the same cases in a short mode
(tests/test_fuzz_harness.py, tests/test_fuzz_hostile.py).
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
from tests.fuzz_hostile import quiet_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=int(os.environ.get("TB_ATTN_FUZZ_CASES", "100000")))
    ap.add_argument("--start", type=int, default=1_000_000, help="first seed (CI's short mode uses 0..)")
    ap.add_argument("--http-every", type=int, default=400)
    ap.add_argument("--http-batch", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=0, help="stop (counts saved) after this many seconds; 0: no limit")
    ap.add_argument("--resume", action="store_true", help="continue the run whose counts are in --out")
    ap.add_argument("--out", default="fuzz_counts.json")
    args = ap.parse_args()

    counts: Counter = Counter()
    by_class: dict[str, Counter] = {}
    examples: dict[str, list[str]] = {}
    seed, spent = args.start, 0.0
    if args.resume and os.path.exists(args.out):
        with open(args.out) as fh:
            old = json.load(fh)
        counts.update({k: v for k, v in old.items() if k in ("cli_cases", "hostile_cases", "http_cases", "http_requests")})
        counts.update(old["problems"])
        by_class = {k: Counter(v) for k, v in old.get("classes", {}).items()}
        examples = old["examples"]
        seed, spent = old["next_seed"], old["seconds"]
    t0 = time.time()

    def note(problems: list[str], where: str, klass: str) -> None:
        for p in problems:
            kind = p.split(":", 1)[0]
            counts[kind] += 1
            by_class.setdefault(klass, Counter())[kind] += 1
            key = f"{klass}/{kind}"  # per class too: one class's problems never hide another's
            examples.setdefault(key, [])
            if len(examples[key]) < 5:  # with the seed, so that make_case / make_hostile_case(seed) replays it
                examples[key].append(f"{where}: {p[:600]}")

    def save() -> None:
        doc = {"cli_cases": counts["cli_cases"], "hostile_cases": counts["hostile_cases"],
               "http_cases": counts["http_cases"], "http_requests": counts["http_requests"],
               "seconds": round(spent + time.time() - t0),
               "problems": {k: v for k, v in counts.items() if not k.startswith(("cli_", "http_", "hostile_"))},
               "classes": {k: dict(v) for k, v in sorted(by_class.items())},
               "examples": examples, "first_seed": args.start, "next_seed": seed}
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, args.out)

    def total() -> int:
        return counts["cli_cases"] + counts["hostile_cases"] + counts["http_cases"]

    try:
        while total() < args.cases and not (args.seconds and spent + time.time() - t0 > args.seconds):
            # the seed is the case's name: a value case and a hostile case of the same seed, then the next
            note(run_and_judge(seed), f"seed {seed}", "value")
            counts["cli_cases"] += 1
            by_class.setdefault("value", Counter())["cases"] += 1
            klass, problems, _ = quiet_run(seed)
            note(problems, f"hostile seed {seed}", klass)
            counts["hostile_cases"] += 1
            by_class.setdefault(klass, Counter())["cases"] += 1
            seed += 1
            if counts["cli_cases"] % args.http_every == 0:
                seeds = list(range(seed, seed + args.http_batch))
                note(http_batch(seeds, counts), f"seeds {seeds[0]}-{seeds[-1]}", "http")
                seed += args.http_batch
            if counts["cli_cases"] % args.save_every == 0:
                save()
    except KeyboardInterrupt:
        save()
        print(f"interrupted: counts saved to {args.out}; --resume goes on from seed {seed}", file=sys.stderr)
        return 130
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
