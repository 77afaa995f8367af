"""Structure-aware fuzz cases, shared by the CI tests (tests/test_fuzz_harness.py, short mode) and
the long mode (scripts/fuzz_long.py): one seed -> one case (traces, a snapshot, a pattern file, the
command that reads them), run through the CLI entry point, and the judgement of what came out.

The traces are real: the CPU traces the suite records (tests/recorded.py) and, when ../shared is
there, the small real GPU traces; tests/test_fuzz_structure.py: mutate() bends them (events dropped,
fields mistyped, absurd numbers) and the kinds added here are the issue-27 findings' shapes: deep
nesting with wide fan-out, 5,000-digit integers, subnormal durations, NaN and infinity written as
text, call tags and step numbers with absurd fields. A snapshot is tests/memory_snapshots.py's known
one with fields bent; a pattern file is a valid row whose pattern is hostile (backtracking shapes,
lookaround, huge repeats, junk).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import math
import os
import pickle
import random
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import SHARED_TRACES, recorded_trace

CASE_SECONDS = 30  # one case using more CPU time than this is a hang (the fuzzers used the same bound)
# ...and one case blocked past this wall-clock time is a hang too (a read that never returns uses no
# CPU). The wall bound is looser because a niced long run on a loaded machine is starved, not hung:
# session 7's long run counted a 0.3 s case as "past 30 s" under load 4.
WALL_SECONDS = 300
RECORDED = ["small", "sdpa", "math", "eager"]
# Small enough for hundreds of cases a minute; the 55 MB ones are in bench/, not here.
SHARED = ["tl_mi300x_torch_compile_small", "tl_h100_bert_small_sdpa_flash", "tl_mi300x_bert_small_sdpa_aotriton"]
BIG = "\u0000BIGINT\u0000"  # replaced by a 5,000-digit integer in the JSON text (json.dumps refuses to write one)
DIGITS = "9" * 5000
HOSTILE_PATTERNS = ["(a|aa)+$", "(a+)+$", "(x*y*)*z", "(.*a){25}", "(?<=x)attn", r"(a)\1", "(x{1000}){1000}",
                    "[", "(?P<n>a)(?P=n)", "\\", "a" * 499, "(?i)fmha|flash", "^$", ".*", "(?s).+", "\u202e\U0001f9e8"]


def sources() -> list[str]:
    """Names of the traces cases start from: recorded roles, and shared GPU traces when present."""
    return RECORDED + [n for n in SHARED if (SHARED_TRACES / f"{n}.json.gz").exists()]


def source_doc(name: str) -> dict:
    path = recorded_trace(name) if name in RECORDED else SHARED_TRACES / f"{name}.json.gz"
    return json.loads(gzip.decompress(Path(path).read_bytes()))


@functools.lru_cache(maxsize=None)
def _doc_cached(name: str) -> str:
    return json.dumps(source_doc(name))


@functools.lru_cache(maxsize=None)
def _doc_pickled(name: str) -> bytes:
    return pickle.dumps(json.loads(_doc_cached(name)), protocol=5)


def doc_copy(name: str) -> dict:
    """A fresh copy of source ``name``'s document to bend: equal to json.loads(_doc_cached(name)), in a
    third of the time (a pickle of it loaded; the long run makes one or two a case)."""
    return pickle.loads(_doc_pickled(name))


# -- mutations of a trace ------------------------------------------------------------------------

def _ops(events):
    return [e for e in events if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))
            and isinstance(e.get("dur"), (int, float)) and e.get("ph") == "X"]


def extra_mutation(events: list, kind: str, rnd: random.Random) -> None:
    """The issue-27 shapes, applied in place to a trace's event list."""
    ops = _ops(events)
    if not ops:
        return
    e = rnd.choice(ops)
    if kind == "nest":  # deep nesting with wide fan-out: a chain of ops, each holding many short ones
        depth, fan = rnd.choice([(200, 30), (1500, 8), (50, 400), (3000, 2)])
        t0, span = e["ts"], max(float(e["dur"]), 1.0) * 10 + depth * 4
        for d in range(depth):
            events.append({"ph": "X", "cat": e.get("cat", "cpu_op"), "name": rnd.choice(
                ["aten::bmm", "aten::softmax", "nn.Module: SelfAttention_0", "aten::linear", "aten::matmul"]),
                "ts": t0 + d, "dur": span - 2 * d, "pid": e.get("pid"), "tid": e.get("tid")})
            for w in range(fan):
                events.append({"ph": "X", "cat": "cpu_op", "name": rnd.choice(["aten::bmm", "aten::softmax", "aten::mul"]),
                               "ts": t0 + span - d - 1 - (w + 1) / (fan + 2), "dur": 0.5 / (fan + 2),
                               "pid": e.get("pid"), "tid": e.get("tid")})
    elif kind == "digits":  # a 5,000-digit integer where a number goes
        target = rnd.choice(["ts", "dur", "pid", "tid", "args"])
        if target == "args":
            e.setdefault("args", {})
            if isinstance(e["args"], dict):
                e["args"][rnd.choice(["correlation", "External id", "Sequence number", "stream", "Input Dims"])] = (
                    [[BIG, 4]] if rnd.random() < 0.3 else BIG)
        else:
            e[target] = BIG
    elif kind == "tiny":  # subnormal durations on a whole category: time > 0, rates overflow
        cat = e.get("cat")
        for x in ops:
            if x.get("cat") == cat:
                x["dur"] = rnd.choice([5e-324, 1e-310, 2.2e-308])
    elif kind == "nan_text":  # NaN/inf as text where the engine parses numbers from strings
        for x in ops:
            ci = (x.get("args") or {}).get("Concrete Inputs") if isinstance(x.get("args"), dict) else None
            if isinstance(ci, list) and ci:
                ci[rnd.randrange(len(ci))] = rnd.choice(["nan", "inf", "-inf", "1e999", "-0", DIGITS[:400]])
    elif kind == "tag":  # a collector call tag with absurd fields around an op
        fields = {"layer": rnd.choice(["blocks.0.attn", "", "\u202e<b>", "x" * 300]),
                  rnd.choice(["lq", "lk", "b", "hq", "d", "mem_peak"]): rnd.choice(["9" * 300, "nan", "-5", "0", "1e400"]),
                  rnd.choice(["dropout", "scale"]): rnd.choice(["nan", "inf", "-inf", "1e999", "0.1"])}
        name = "tb_attn::call " + "&".join(f"{k}={v}" for k, v in fields.items())
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": e.get("pid"), "tid": e.get("tid"),
                       "ts": e["ts"] - 0.25, "dur": float(e["dur"]) + 0.5})
    elif kind == "step":
        events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + rnd.choice([DIGITS, "٣", "-1", "1" * 13]),
                       "pid": e.get("pid"), "tid": e.get("tid"), "ts": e["ts"] - 1, "dur": float(e["dur"]) + 2})
    elif kind == "memory":  # profiler [memory] instants with absurd sizes
        for _ in range(rnd.randrange(1, 20)):
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "s": "t", "pid": e.get("pid"),
                           "tid": e.get("tid"), "ts": e["ts"] + rnd.random() * max(float(e["dur"]), 1.0),
                           "args": {"Addr": rnd.choice([0, 1, 2**63, -1]), "Bytes": rnd.choice([2**62, -2**62, 1e300, 5e-324, 7]),
                                    "Total Allocated": rnd.choice([2**62, -1, 1e300, 0]), "Total Reserved": rnd.choice([0, 2**63]),
                                    "Device Type": rnd.choice([0, 1, 7]), "Device Id": rnd.choice([-1, 0, 2**40])}})


EXTRA_KINDS = ["nest", "digits", "tiny", "nan_text", "tag", "step", "memory"]


def trace_text(rnd: random.Random) -> str:
    """One mutated trace as JSON text: test_fuzz_structure's mutations and the extra kinds, mixed."""
    from tests.test_fuzz_structure import MUTATION_KINDS, WEIRD_VALUES, apply_mutations

    doc = doc_copy(rnd.choice(sources()))
    muts = []
    for _ in range(rnd.randrange(0, 6)):
        muts.append((rnd.choice(MUTATION_KINDS), rnd.random(), rnd.randrange(1, 201), rnd.randrange(10**6),
                     rnd.choice(WEIRD_VALUES), "".join(chr(rnd.choice([0x41, 0xe9, 0x202e, 0x1f9e8, 0x4e2d, 0x5c])) for _ in range(rnd.randrange(8)))))
    top = rnd.choice(["keep"] * 6 + ["array", "extra", "device_props"])
    body = apply_mutations(doc, muts, top)
    events = body if isinstance(body, list) else body.get("traceEvents")
    if isinstance(events, list):
        for _ in range(rnd.randrange(0 if muts else 1, 3)):
            extra_mutation(events, rnd.choice(EXTRA_KINDS), rnd)
    text = json.dumps(body, ensure_ascii=False, allow_nan=False)
    return text.replace(json.dumps(BIG), DIGITS)


# -- snapshots and pattern files -----------------------------------------------------------------

def snapshot_bytes(rnd: random.Random) -> bytes:
    from tests.memory_snapshots import known_snapshot
    from tests.test_fuzz_structure import WEIRD_VALUES

    snap, _ = known_snapshot()
    for _ in range(rnd.randrange(1, 6)):
        where = rnd.choice(["trace", "segment", "block", "ann", "top"])
        value = rnd.choice(WEIRD_VALUES + [float("nan"), float("inf"), 10**400, -(10**30)])
        with contextlib.suppress(TypeError, KeyError, IndexError, AttributeError):  # an earlier change bent the path
            _bend_snapshot(snap, where, value, rnd)
    data = pickle.dumps(snap, protocol=rnd.choice([2, 3, 4, 5]))
    if rnd.random() < 0.2:
        data = data[: rnd.randrange(1, len(data))]
    return data


def _bend_snapshot(snap, where, value, rnd) -> None:
    if where == "trace" and snap["device_traces"][0]:
        entry = rnd.choice(snap["device_traces"][0])
        entry[rnd.choice(["size", "addr", "time_us", "action", "stream", "frames"])] = value
    elif where == "segment":
        snap["segments"][0][rnd.choice(["total_size", "address", "device", "blocks", "allocated_size"])] = value
    elif where == "block":
        rnd.choice(snap["segments"][0]["blocks"])[rnd.choice(["size", "address", "state", "requested_size"])] = value
    elif where == "ann":
        rnd.choice(snap["external_annotations"])[rnd.choice(["name", "time_us", "stage", "device"])] = value
    else:
        snap[rnd.choice(["segments", "device_traces", "allocator_settings", "external_annotations"])] = value


PATTERN_ROW = """[[family]]
name = "fuzz_row"
pattern = {pattern}
stage = "fused"
pass = "fwd"
implementation = "custom"
example = {example}
source = "fuzz"
"""


def pattern_file(rnd: random.Random) -> str:
    pattern = rnd.choice(HOSTILE_PATTERNS)
    if rnd.random() < 0.3:
        pattern += rnd.choice(HOSTILE_PATTERNS)
    example = rnd.choice(["aaaa", "a" * 44 + "!", "my_fmha_kernel", "x", "aa"])
    return PATTERN_ROW.format(pattern=json.dumps(pattern, ensure_ascii=False), example=json.dumps(example))


# -- one case ------------------------------------------------------------------------------------

@dataclass
class Case:
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> bytes, under the case's directory


def make_case(seed: int) -> Case:
    """The case of ``seed``: a command and the files it reads (paths relative to a fresh directory)."""
    rnd = random.Random(seed)
    files: dict[str, bytes] = {}
    n = rnd.choice([1, 1, 1, 2])
    names = []
    for i in range(n):
        raw = trace_text(rnd).encode("utf-8", "surrogatepass")
        name = f"run{i}/w.1.pt.trace.json" + (".gz" if rnd.random() < 0.3 else "")
        files[name] = gzip.compress(raw, compresslevel=1) if name.endswith(".gz") else raw
        names.append(name)
        if rnd.random() < 0.25:
            files[f"run{i}/w.1.memory.pickle"] = snapshot_bytes(rnd)
    extra: list[str] = []
    if rnd.random() < 0.2:
        files["p.toml"] = pattern_file(rnd).encode("utf-8", "surrogatepass")
        extra = ["--patterns", "p.toml"]
    command = rnd.choice(["report", "report", "report", "compare", "annotate", "snapshot"])
    if command == "compare":
        argv = ["compare", names[0], names[-1] if n > 1 else names[0]]
    elif command == "annotate":
        argv = ["annotate", names[0], "-o", "out.json" + rnd.choice(["", ".gz"])]
    elif command == "snapshot":
        files["s.memory.pickle"] = snapshot_bytes(rnd)
        argv = ["report", "s.memory.pickle"]
    else:
        argv = ["report", *names]
    if command != "annotate" and rnd.random() < 0.7:
        argv.append("--json")
    return Case(argv + extra + ["-q"], files)


class Hang(Exception):
    pass


def _cpu_bound(signum, frame):
    raise Hang(f"used more than {CASE_SECONDS} s of CPU time")


def _wall_bound(signum, frame):
    raise Hang(f"ran past {_WALL[0]} s of wall-clock time")


_WALL = [WALL_SECONDS]  # the bound of the case running now, for the message


def run_cli_case(case: Case, where: str, wall: int | None = None) -> tuple[int | None, str, str, str | bool]:
    """Run the case in-process through ``cli.main`` in ``where``; (rc, stdout, stderr, hung: False or
    which bound it passed). ``wall``: the wall-clock bound in seconds (default WALL_SECONDS)."""
    wall = WALL_SECONDS if wall is None else wall
    from tb_attn_plugin import cli
    from tb_attn_plugin.attention import patterns

    for rel, data in case.files.items():
        p = Path(where) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    argv = [str(Path(where) / a) if (Path(where) / a).exists() or a.startswith("out.json") else a for a in case.argv]
    out, err = io.StringIO(), io.StringIO()
    old_wall = signal.signal(signal.SIGALRM, _wall_bound)
    old_cpu = signal.signal(signal.SIGPROF, _cpu_bound)
    _WALL[0] = wall
    signal.alarm(wall)
    signal.setitimer(signal.ITIMER_PROF, CASE_SECONDS)  # the process's CPU time, every thread's
    hung, rc = False, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:
                rc = exc.code
    except Hang as exc:
        hung = str(exc)
    except Exception:  # what the CLI lets escape: a traceback the user would see
        err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_cpu)
        signal.signal(signal.SIGALRM, old_wall)
        patterns.set_user_families(())  # in-process: the next case starts from the built-in table
    return rc, out.getvalue(), err.getvalue(), hung


def _strict(text: str):
    """json.loads that refuses NaN and Infinity, as strict JSON clients (browsers' JSON.parse) do
    (and reads the 5,000-digit integers the cases wrote, which Python's default limit refuses)."""
    def refuse(name):
        raise ValueError(f"non-finite number {name} in JSON output")
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.loads(text, parse_constant=refuse)
    finally:
        sys.set_int_max_str_digits(limit)


def non_finite(x, where="") -> list[str]:
    if isinstance(x, float):
        return [] if math.isfinite(x) else [where or "."]
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    out = []
    for k, v in items:
        out += non_finite(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}")
    return out


def judge_cli(case: Case, where: str, rc, out: str, err: str, hung: str | bool) -> list[str]:
    """The problems of one CLI outcome, by class ("traceback: ...", "nonfinite: ...", "hang: ...", ...)."""
    if hung:
        return [f"hang: {case.argv} {hung}"]
    problems = []
    if "Traceback" in err or "Traceback" in out:
        problems.append(f"traceback: {case.argv}: {err[-300:]}")
    if rc not in (0, 2):
        problems.append(f"exit: {case.argv} exited {rc}: {err[-300:]}")
    lines = [line for line in err.splitlines() if line.strip()]
    for line in lines:
        if not line.startswith(("tb-attn: error: ", "tb-attn: warning: ", "tb-attn: note: ", "usage:", "  ")):
            problems.append(f"stderr: {case.argv}: {line[:200]}")
            break
    if rc == 2 and not any(line.startswith(("tb-attn: error: ", "usage:")) for line in lines):
        problems.append(f"silent: {case.argv} exited 2 without an error line")
    if "--json" in case.argv and out.strip():
        try:
            doc = _strict(out)
        except ValueError as exc:
            problems.append(f"nonfinite: {case.argv}: {exc}")
        else:
            bad = non_finite(doc)
            if bad:
                problems.append(f"nonfinite: {case.argv}: {bad[:3]}")
    if "annotate" in case.argv:
        left = [n for n in os.listdir(where) if n.startswith(".tb-attn-annotate-")]
        if left:
            problems.append(f"tmpfile: {case.argv} left {left}")
        if rc == 0:
            outp = Path(where) / case.argv[case.argv.index("-o") + 1]
            data = outp.read_bytes()
            text = gzip.decompress(data) if outp.name.endswith(".gz") else data
            try:  # the inputs were written without NaN/Infinity: any in the output is ours
                _strict(text.decode("utf-8", "surrogatepass"))
            except ValueError as exc:
                problems.append(f"nonfinite: {case.argv}: the annotated trace: {str(exc)[:200]}")
    return problems


def run_and_judge(seed: int) -> list[str]:
    case = make_case(seed)
    with tempfile.TemporaryDirectory(prefix="tb-attn-fuzz-") as where:
        rc, out, err, hung = run_cli_case(case, where)
        return judge_cli(case, where, rc, out, err, hung)


# -- the plugin's routes -------------------------------------------------------------------------

def place_http_batch(seeds: list[int], root: Path) -> dict[str, int]:
    """Write the files of each seed's case under ``root`` (one run directory per trace); returns
    {run name: seed}. Pattern files and commands are the CLI's business; the routes read the logdir."""
    from tests.conftest import OLD

    runs = {}
    for seed in seeds:
        case = make_case(seed)
        for rel, data in case.files.items():
            if rel.endswith(".toml"):
                continue
            p = root / f"case{seed}" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            os.utime(p, (OLD, OLD))
            if "/" in rel:
                runs[f"case{seed}/{rel.split('/')[0]}"] = seed
            else:
                runs[f"case{seed}"] = seed
    return runs


def http_requests(runs: list[str], rnd: random.Random) -> list[str]:
    """Each run's routes, and a comparison with another run."""
    out = []
    for run in runs:
        q = f"run={run}"
        out += [f"report?{q}", f"call?{q}&id={rnd.choice([0, 1, 63, 999999999])}", f"memory?{q}&points={rnd.choice([2, 50, 999999])}",
                f"kernels?{q}&stage={rnd.choice(['fused', 'softmax', 'other'])}&pass={rnd.choice(['fwd', 'bwd'])}",
                f"compare?{q}&run={rnd.choice(runs)}"]
        if rnd.random() < 0.1:
            out.append(f"annotated?{q}")
    return out


def judge_http(url: str, status: int, headers, body: bytes, server_paths: list[str]) -> list[str]:
    """The problems of one answer: a 5xx, a non-JSON error, non-finite numbers, a server path in the body."""
    problems = []
    if status >= 500:
        problems.append(f"5xx: {url}: {status} {body[:200]!r}")
    for p in server_paths:
        if p.encode() in body:
            problems.append(f"abspath: {url}: {p} in the body")
            break
    if url.startswith("annotated") and status == 200:
        if headers.get("X-Content-Type-Options") != "nosniff":
            problems.append(f"header: {url}: no nosniff")
        return problems
    if not headers.get("Content-Type", "").startswith("application/json"):
        problems.append(f"notjson: {url}: {status} {headers.get('Content-Type')}")
        return problems
    try:
        doc = _strict(body.decode("utf-8"))
    except ValueError as exc:
        problems.append(f"nonfinite: {url}: {str(exc)[:200]}")
        return problems
    if status >= 400 and not (isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc["error"]):
        problems.append(f"error_body: {url}: {status} {body[:200]!r}")
    if status == 200 and url.startswith("report") and isinstance(doc, dict):
        nulls = _nulls_where_numbers(doc)
        if nulls:
            problems.append(f"nonfinite: {url}: null where the schema says number: {nulls[:3]}")
    return problems


def _nulls_where_numbers(doc) -> list[str]:
    """msgspec writes NaN and inf as null: a report that fails its schema only by a null is a non-finite number."""
    import jsonschema

    schema = _schema()
    return [f"{'/'.join(map(str, e.absolute_path))}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)
            if e.instance is None][:5]


@functools.lru_cache(maxsize=None)
def _schema():
    from importlib import resources

    return json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text())
