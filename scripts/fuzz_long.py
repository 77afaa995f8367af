"""The fuzz harness's long mode: tests/fuzz_cases.py's and tests/fuzz_hostile.py's cases by the thousand,
counted instead of stopped.

    TB_ATTN_FUZZ_CASES=100000 nice -n 19 .venv-test/bin/python scripts/fuzz_long.py --out fuzz_counts.json
    ... --resume        # go on from where a stopped run's --out left off (its seeds and counts)

Runs, in --workers forked processes (one per CPU this process may use; each runs its cases in-process
through cli.main, one at a time, so the per-case CPU-time and peak-RSS oracle reads that process's own
figures), one value-mutation CLI case (tests/fuzz_cases.py) and one hostile-structure case
(tests/fuzz_hostile.py: bent Input Dims, adversarial names, gzip member splits, memo tricks, shared
references, hostile sweep.jsonl, FIFOs; each judged by the time and memory per input byte oracle too)
in turn, and every --http-every cases one batch of --http-batch cases' files as a logdir under the
real TensorBoard app, requesting every route of every run. Writes the counts (cases by class, requests,
problems by class and kind: traceback, nonfinite, hang, slow, memory, 5xx, ...) to --out every
--save-every cases and at the end, with the first examples of each kind, so a run stopped at any time
(SIGINT or SIGTERM: the counts of every finished block of seeds saved, the workers killed with their
temporary directories removed, the plugin's workers stopped, exit 130) has its figures; a worker dies
with this process even when it is killed outright (PR_SET_PDEATHSIG).
docs/robustness.md has the last counts. CI runs the same cases in a short mode
(tests/test_fuzz_harness.py, tests/test_fuzz_hostile.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from multiprocessing import connection, get_context
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
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                    help="forked processes running the seeds' cases (default: the CPUs this process may use)")
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
               "examples": examples, "first_seed": args.start, "next_seed": seed, "workers": args.workers,
               "load": [round(x, 2) for x in os.getloadavg()]}
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, args.out)

    def total() -> int:
        return counts["cli_cases"] + counts["hostile_cases"] + counts["http_cases"]

    pool = Workers(max(1, args.workers))
    try:
        while total() < args.cases and not (args.seconds and spent + time.time() - t0 > args.seconds):
            # the seed is the case's name: a value case and a hostile case of each seed, then the next; a
            # block of seeds ends at the next save or HTTP batch, and is counted once all of it has run
            done = counts["cli_cases"]
            n = min(args.save_every - done % args.save_every, args.http_every - done % args.http_every,
                    math.ceil((args.cases - total()) / 2))
            for s, (value, (klass, problems)) in zip(range(seed, seed + n), pool.run(range(seed, seed + n))):
                note(value, f"seed {s}", "value")
                counts["cli_cases"] += 1
                by_class.setdefault("value", Counter())["cases"] += 1
                note(problems, f"hostile seed {s}", klass)
                counts["hostile_cases"] += 1
                by_class.setdefault(klass, Counter())["cases"] += 1
            seed += n
            if counts["cli_cases"] % args.http_every == 0:
                seeds = list(range(seed, seed + args.http_batch))
                note(http_batch(seeds, counts), f"seeds {seeds[0]}-{seeds[-1]}", "http")
                seed += args.http_batch
            if counts["cli_cases"] % args.save_every == 0:
                save()
    except KeyboardInterrupt:
        pool.close()
        save()
        print(f"interrupted: counts saved to {args.out}; --resume goes on from seed {seed}", file=sys.stderr)
        return 130
    finally:
        pool.close()
    save()
    print(json.dumps({k: v for k, v in counts.items()}))
    return 0


def one_seed(seed: int) -> tuple[list[str], tuple[str, list[str]]]:
    """The problems of seed's value case, and the class and problems of its hostile case."""
    value = run_and_judge(seed)
    klass, problems, _ = quiet_run(seed)
    return value, (klass, problems)


class Workers:
    """``n`` forked processes, each running one seed at a time (sent over its pipe). Forked after the
    sources are parsed, so each starts warm; its temporary directories live under one directory of
    this run, removed by close() (a worker is killed where it stands: a case in cli.main must not be
    able to take the signal for its own)."""

    def __init__(self, n: int):
        from tests.fuzz_cases import _doc_cached, sources
        from tests.memory_snapshots import known_snapshot

        for name in sources():  # parsed once here, shared by the workers' copies of this process
            _doc_cached(name)
        known_snapshot()
        import tb_attn_plugin.cli  # noqa: F401  the engine imported once, before the fork

        self.tmp = tempfile.mkdtemp(prefix=f"tb-attn-fuzz-run-{os.getpid()}-")
        ctx = get_context("fork")
        self.procs, self.conns = [], []
        for _ in range(n):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_serve, args=(theirs, self.tmp, os.getpid()), daemon=False)
            p.start()
            theirs.close()
            self.procs.append(p)
            self.conns.append(mine)

    def run(self, seeds: range) -> list:
        """one_seed of each seed, in the order of ``seeds``; each worker given the next seed as it frees."""
        out: dict[int, object] = {}
        todo = iter(seeds)
        busy: dict[object, int] = {}
        for c in self.conns:
            s = next(todo, None)
            if s is None:
                break
            c.send(s)
            busy[c] = s
        while busy:
            for c in connection.wait(list(busy)):
                try:
                    out[busy.pop(c)] = c.recv()
                except EOFError:
                    raise RuntimeError("a fuzz worker died (see its stderr)") from None
                s = next(todo, None)
                if s is not None:
                    c.send(s)
                    busy[c] = s
        return [out[s] for s in seeds]

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(10)
        self.procs = []
        for c in self.conns:
            c.close()
        self.conns = []
        shutil.rmtree(self.tmp, ignore_errors=True)


def _serve(conn, tmp: str, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the parent
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    tempfile.tempdir = tmp
    os.environ["TMPDIR"] = tmp
    code = 0
    try:
        while True:
            try:
                seed = conn.recv()
            except EOFError:
                break
            conn.send(one_seed(seed))
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)  # never the parent's atexit (it removes the recorded traces the parent made)


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
