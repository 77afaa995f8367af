"""Hostile-structure fuzz cases (issue 47, items 6-12 and 15): the shapes tests/fuzz_cases.py's value
mutations never produce, one generator per class, and an oracle for time and memory per input byte.

Classes (``CLASSES``), each built from a real trace or snapshot of the suite:
  bent_dims    an SDPA op's ``Input Dims`` bent: a key of one dimension, zero heads, negative or 2**62
               dimensions, strings, a non-list (attention/shapes.py reads them; issue item 6)
  long_name    a kernel, op, module, frame or device name of 4-64 KiB built to make a backtracking
               regex slow: a repeated prefix of a built-in row with its terminal missing (item 7)
  gzip_split   a trace gzip'd as many members, split inside leading or inner blanks (item 8)
  memo         a pickle whose memo index is huge (LONG_BINPUT 2**28 and friends), alone or before a
               real snapshot (item 9)
  shared_refs  a snapshot whose entry, segment, blocks list or device trace is one object referenced
               many times (item 10)
  sweep_cell   a ``sweep.jsonl`` with list-valued key fields, 1e400, 10**400, 1e-300, NaN (item 11),
               read by the plugin's sweep index as ``/sweep`` reads it
  fifo         a FIFO given as ``--patterns``, in ``TB_ATTN_PATTERNS`` or as the trace (item 12)

The oracle: a case fails ("slow") when it uses more CPU time than ``TIME_FLOOR_S + TIME_PER_MB_S`` per
MB of input, and ("memory") when its peak resident memory grows by more than ``MEM_FLOOR`` plus
``MEM_PER_BYTE`` per input byte, or it runs out of the ``AS_HEADROOM`` of address space it is given.
Peak RSS per case is read from ``VmHWM`` after resetting it (``/proc/self/clear_refs``, Linux 4.0+).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import pickle
import random
import resource
import struct
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tests import fuzz_cases

CLASSES = ["bent_dims", "long_name", "gzip_split", "memo", "shared_refs", "sweep_cell", "fifo"]

# The oracle's bounds. A report of the suite's recorded traces or the small shared GPU traces (0.1-0.8
# MB of JSON) takes 0.01-0.2 s of CPU once the engine is imported (the first case, imports included,
# 0.2 s); the bounds leave ten times that for a loaded machine but not the quadratic work of the
# issue (on main, one 64 KiB adversarial name in a 0.75 MB trace: 5.4 s of CPU; 4 GB for 9 bytes).
TIME_FLOOR_S = 2.0
TIME_PER_MB_S = 2.0
MEM_FLOOR = 400 << 20
MEM_PER_BYTE = 100
AS_HEADROOM = 1536 << 20  # the 1.5 GiB of address space, over what the harness holds
FIFO_WALL_S = 5  # a FIFO nobody writes blocks without CPU: past this it is a hang


def bound_seconds(nbytes: int) -> float:
    return TIME_FLOOR_S + TIME_PER_MB_S * nbytes / 1e6


def bound_bytes(nbytes: int) -> int:
    return MEM_FLOOR + MEM_PER_BYTE * nbytes


# -- bent Input Dims -----------------------------------------------------------------------------

BENT_TENSORS = [[16], [], [2, 0, 8, 16], [2, 4, 0, 16], [2, 4, 8, -1], [-2, 4, 8, 16], [2**62] * 4,
                [2, 4, 8, "16"], [2, 4, 8, None], [2, 4, 8, 1e300], [[2, 4]], "x", None, [2, 4, 8, 16, 1, 1, 1],
                [2, 4, 8, 0], [1, 2**31, 1, 1]]
BENT_WHOLE = ["abc", {}, 7, None, [], [[]], [None, None, None], [[2, 4, 8, 16]]]


def bent_dims_doc(rnd: random.Random) -> dict:
    """A recorded SDPA trace (tests/recorded.py "sdpa": torch.nn.functional.scaled_dot_product_attention
    on the CPU) with its attention ops' Input Dims bent."""
    doc = fuzz_cases.doc_copy(rnd.choice(["sdpa", "sdpa", "math", "eager"]))
    ops = [e for e in doc["traceEvents"] if isinstance(e, dict) and isinstance(e.get("args"), dict)
           and "Input Dims" in e["args"] and any(w in str(e.get("name")) for w in ("scaled_dot_product", "attention",
                                                                                  "bmm", "softmax", "matmul"))]
    for e in rnd.sample(ops, min(len(ops), rnd.randrange(1, 4))) if ops else []:
        dims = e["args"]["Input Dims"]
        if rnd.random() < 0.2 or not isinstance(dims, list) or not dims:
            e["args"]["Input Dims"] = rnd.choice(BENT_WHOLE)
            continue
        for _ in range(rnd.randrange(1, 3)):
            i = rnd.randrange(min(len(dims), 4))
            dims[i] = rnd.choice(BENT_TENSORS)
    return doc


# -- long adversarial names ----------------------------------------------------------------------

def adversarial_name(rnd: random.Random, n: int) -> str:
    """A name of about ``n`` characters: a built-in row's prefix repeated with its end missing, so a
    backtracking regex tries every start and every split (shapes of attention/patterns.py's kernel
    rows such as ``flash_\\w+<[^(]*Flash_bwd_kernel_traits<``, the op rules' ``\\w*(Attn|Attention)\\w*
    (Func|Function)``, frame rules' ``\\w+Backward\\d*::apply`` and device names' ``\\d+\\s*GB``)."""
    unit = rnd.choice(["flash_a<", "flashinfer::PrefillWith", "Attn", "aBackward", "1", "sm90::mla", "a", "fmha_",
                       "_fwd", "cutlass::", "softmax_", "Attention", "ampere_", "void at::native::", " ", "<<"])
    head = rnd.choice(["", "flashinfer::", "sm90::", "nn.Module: ", "void ", "fmha_cutlassF_"])
    tail = rnd.choice(["", "!", "(", "Kernel", "_kerne"])
    return head + unit * max(1, n // len(unit)) + tail


def long_name_doc(rnd: random.Random) -> dict:
    """A recorded trace with one or two names replaced by adversarial ones; a kernel (launched by a
    cudaLaunchKernel with its correlation id, as kineto writes it) is added when the trace has none."""
    doc = fuzz_cases.doc_copy(rnd.choice(fuzz_cases.sources()))
    events = doc["traceEvents"]
    ops = fuzz_cases._ops(events)
    for _ in range(rnd.randrange(1, 3)):
        name = adversarial_name(rnd, rnd.choice([4096, 16384, 65536]))
        where = rnd.choice(["kernel", "op", "module", "frame", "device"])
        kernels = [e for e in ops if e.get("cat") == "kernel"]
        if where == "kernel" and kernels:
            rnd.choice(kernels)["name"] = name
        elif where == "kernel" and ops:
            e = rnd.choice(ops)
            corr = 10**9 + rnd.randrange(1000)
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": e.get("pid"),
                           "tid": e.get("tid"), "ts": e["ts"], "dur": 1, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": e["ts"] + 2, "dur": 3,
                           "args": {"correlation": corr, "device": 0, "stream": 7}})
        elif where == "op" and ops:
            rnd.choice(ops)["name"] = "aten::" + name if rnd.random() < 0.5 else name
        elif where == "module" and ops:
            rnd.choice(ops)["name"] = "nn.Module: " + name
        elif where == "frame" and ops:
            e = rnd.choice(ops)
            events.append({"ph": "X", "cat": "python_function", "name": "torch/autograd/" + name + ".py(12): apply",
                           "pid": e.get("pid"), "tid": e.get("tid"), "ts": e["ts"], "dur": e["dur"]})
        else:
            doc["deviceProperties"] = [{"id": 0, "name": name, "totalGlobalMem": 85899345920,
                                        "computeMajor": 9, "computeMinor": 0}]
    return doc


# -- gzip member splits --------------------------------------------------------------------------

def gzip_split_bytes(rnd: random.Random, text: bytes) -> bytes:
    """``text`` with blanks before it or inside it, gzip'd as many members cut inside the blanks (or
    the whole document cut every few bytes): each member a valid gzip stream, their concatenation
    the document (RFC 1952, 2.2)."""
    shape = rnd.choice(["lead_big", "lead_many", "inner", "every"])
    if shape == "lead_big":  # the file: members of 1 MiB of blanks before the document
        parts = [b" " * (1 << 20)] * rnd.choice([5, 40, 150]) + [text]
    elif shape == "lead_many":  # thousands of members of a few blanks each
        parts = [b" \n\t\r"[: rnd.randrange(1, 5)] * rnd.randrange(1, 3) for _ in range(rnd.choice([100, 2000, 6000]))]
        parts.append(text)
    elif shape == "inner":  # blanks after the first '{' split across members
        cut = text.index(b"{") + 1
        blanks = [b" " * rnd.choice([7, 4096, 1 << 20]) for _ in range(rnd.choice([3, 50, 400]))]
        parts = [text[:cut], *blanks, text[cut:]]
    else:  # the document itself cut every k bytes
        k = rnd.choice([3, 64, 4096])
        parts = [text[i:i + k] for i in range(0, len(text), k)][:20000]
        parts.append(text[20000 * k:])
    members: dict[bytes, bytes] = {}  # the same blanks make the same member: compressed once (150 MiB a case)
    return b"".join(members.get(p) or members.setdefault(p, gzip.compress(p, compresslevel=1)) for p in parts if p)


# -- pickles: memo tricks and shared references --------------------------------------------------

def memo_pickle(rnd: random.Random) -> bytes:
    """A pickle putting an object in a memo slot no pickler numbers so (a pickler numbers 0, 1, 2, ...):
    LONG_BINPUT 2**28 alone (the issue's 9 bytes), or before a real snapshot (protocol 2: no frames)."""
    idx = rnd.choice([2**28, 2**31 - 1, 2**32 - 1, 10**6, 1025])
    put = rnd.choice([b"r" + struct.pack("<I", idx), b"p" + str(idx).encode() + b"\n"])  # LONG_BINPUT, PUT
    get = rnd.choice([b"", b"j" + struct.pack("<I", idx), b"g" + str(idx).encode() + b"\n"])
    if rnd.random() < 0.4:
        return b"\x80\x04N" + put + (get + b"0" if get else b"") + b"."
    from tests.memory_snapshots import known_snapshot

    snap, _ = known_snapshot()
    body = pickle.dumps(snap, protocol=2)
    pre = b"N" + put + b"0"  # push None, put it in the slot, pop it: the snapshot after it is untouched
    return body[:2] + pre + body[2:]


def shared_refs_pickle(rnd: random.Random) -> bytes:
    """tests/memory_snapshots.py's snapshot with one object referenced ``n`` times: pickle writes the
    object once and a memo GET for each repeat, so the file stays small while a reader that walks
    every reference does ``n`` (or ``n`` squared) times the work."""
    from tests.memory_snapshots import known_snapshot

    snap, _ = known_snapshot()
    n = rnd.choice([10, 1000, 5000, 100000, 300000])
    what = rnd.choice(["entry", "segment", "blocks", "device_trace", "segment_blocks"])
    if what == "entry" and snap["device_traces"][0]:
        snap["device_traces"][0] = [snap["device_traces"][0][0]] * n
    elif what == "segment":
        snap["segments"] = [snap["segments"][0]] * n
    elif what == "blocks":
        blocks = snap["segments"][0]["blocks"]
        for seg in snap["segments"]:
            seg["blocks"] = blocks
        snap["segments"] = [dict(snap["segments"][0]) for _ in range(min(n, 2000))]
    elif what == "device_trace":
        snap["device_traces"] = [snap["device_traces"][0]] * min(n, 10000)
    else:  # one segment x m whose blocks list is one block x m: the segments x blocks square
        m = min(n, 5000)
        seg = snap["segments"][0]
        seg["blocks"] = [seg["blocks"][0]] * m
        snap["segments"] = [seg] * m
    data = pickle.dumps(snap, protocol=rnd.choice([2, 4, 5]))
    return data


# -- sweep.jsonl cells ---------------------------------------------------------------------------

SWEEP_CELL = {"backend": "math", "batch": 1, "seq_len": 64, "heads": 2, "kv_heads": 2, "head_dim": 16,
              "dtype": "float32", "causal": False, "pass": "fwd", "device": "cpu", "status": "ok",
              "median_s": 1.2e-4, "peak_bytes": 1 << 20}  # the fields tb-attn sweep writes (tests/sweep_data.py)
SWEEP_VALUES = [[1, 2], ["a"], {}, {"a": 1}, "1e400", 1e-300, 1e300, -1, 0, True, None, "fast", "", 2**70, -0.0]


def sweep_text(rnd: random.Random) -> bytes:
    """sweep.jsonl lines: valid cells with one or two fields hostile, written as the JSON text that
    a float cannot hold (1e400, 10**400) or JSON cannot (NaN), a few hundred lines at most."""
    lines = []
    for i in range(rnd.choice([1, 3, 20, 300])):
        cell = dict(SWEEP_CELL, seq_len=64 << (i % 8), batch=1 + i // 8, backend=rnd.choice(["math", "flash", "eager"]))
        text = None
        for _ in range(rnd.randrange(0, 3)):
            k = rnd.choice(list(SWEEP_CELL))
            cell[k] = rnd.choice(SWEEP_VALUES)
            if rnd.random() < 0.3:
                text = json.dumps(cell).replace(json.dumps(k) + ": " + json.dumps(cell[k]),
                                                json.dumps(k) + ": " + rnd.choice(["1e400", "-1e400", "1" + "0" * 400,
                                                                                    "NaN", "Infinity", "1e-400"]), 1)
        lines.append(text or json.dumps(cell))
    return ("\n".join(lines) + "\n").encode()


def run_sweep_case(data: bytes, where: str) -> list[str]:
    """The /sweep route's reading of ``data`` (plugin/sweeps.py's index, as plugin.py's _serve_sweep
    calls it): a document or a ValueError naming the file (a 422), never another exception (a 500)."""
    import msgspec

    from tb_attn_plugin.plugin.layout import Source
    from tb_attn_plugin.plugin.sweeps import SweepIndex

    Path(where, "sweep.jsonl").write_bytes(data)
    index = SweepIndex(Source.from_logdir(where), interval_s=None)
    index.scan()
    try:
        doc = index.get(".", set())
    except (KeyError, ValueError) as exc:
        msg = str(exc)
        if not msg.startswith("sweep.jsonl"):
            return [f"unclear_error: /sweep 422 {msg[:200]!r} does not name the file"]
        return []
    except Exception:
        return [f"5xx: /sweep: {traceback.format_exc()[-400:]}"]
    try:
        body = msgspec.json.encode(doc)
        fuzz_cases._strict(body.decode())
    except Exception as exc:
        return [f"5xx: /sweep's document cannot be sent: {str(exc)[:200]}"]
    return []


# -- one case ------------------------------------------------------------------------------------

@dataclass
class HostileCase:
    klass: str
    argv: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    sweep: bytes | None = None


def _json_bytes(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")


def make_hostile_case(seed: int, klass: str | None = None) -> HostileCase:
    rnd = random.Random(seed)
    klass = klass or CLASSES[seed % len(CLASSES)]
    json_flag = ["--json"] if rnd.random() < 0.6 else []
    if klass == "bent_dims":
        return HostileCase(klass, ["report", "t.pt.trace.json", *json_flag, "-q"], {"t.pt.trace.json": _json_bytes(bent_dims_doc(rnd))})
    if klass == "long_name":
        return HostileCase(klass, ["report", "t.pt.trace.json", *json_flag, "-q"], {"t.pt.trace.json": _json_bytes(long_name_doc(rnd))})
    if klass == "gzip_split":
        text = fuzz_cases._doc_cached(rnd.choice(fuzz_cases.sources())).encode()
        return HostileCase(klass, ["report", "t.pt.trace.json.gz", *json_flag, "-q"],
                           {"t.pt.trace.json.gz": gzip_split_bytes(rnd, text)})
    if klass in ("memo", "shared_refs"):
        data = memo_pickle(rnd) if klass == "memo" else shared_refs_pickle(rnd)
        name = "s.memory.pickle"
        if rnd.random() < 0.3:
            data, name = gzip.compress(data, compresslevel=6), name + ".gz"
        return HostileCase(klass, ["report", name, *json_flag, "-q"], {name: data})
    if klass == "sweep_cell":
        return HostileCase(klass, sweep=sweep_text(rnd))
    # fifo: as the pattern file (argument or environment) or as the trace
    trace = {"t.pt.trace.json": fuzz_cases._doc_cached("small").encode()}
    how = rnd.choice(["patterns", "env", "trace"])
    if how == "patterns":
        return HostileCase(klass, ["report", "t.pt.trace.json", "--patterns", "p.toml", "-q"], trace, ["p.toml"])
    if how == "env":
        return HostileCase(klass, ["report", "t.pt.trace.json", "-q"], trace, ["p.toml"], {"TB_ATTN_PATTERNS": "p.toml"})
    return HostileCase(klass, ["report", "f.pt.trace.json", "-q"], {}, ["f.pt.trace.json"])


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS (Linux 4.0+)
        return True
    except OSError:
        return False


@contextlib.contextmanager
def _address_space(headroom: int):
    """RLIMIT_AS at what the process maps now plus ``headroom``: an input that needs more gets the
    CLI's "not enough memory" instead of the machine's memory."""
    old = resource.getrlimit(resource.RLIMIT_AS)
    want = _status("VmSize") + headroom
    if old[0] != resource.RLIM_INFINITY and old[0] < want:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (want, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_hostile(seed: int, klass: str | None = None) -> tuple[str, list[str], dict]:
    """(class, problems, measures) of the case of ``seed``: judged as tests/fuzz_cases.py judges any
    CLI case (traceback, exit status, one error line, finite JSON, hang), plus the oracle."""
    case = make_hostile_case(seed, klass)
    with tempfile.TemporaryDirectory(prefix="tb-attn-fuzz-h-") as where:
        nbytes = sum(len(b) for b in case.files.values()) + len(case.sweep or b"")
        for rel in case.fifos:
            os.mkfifo(Path(where) / rel)
        old_env = {k: os.environ.get(k) for k in case.env}
        os.environ.update({k: str(Path(where) / v) for k, v in case.env.items()})
        peak_known = _reset_peak()
        rss0, cpu0 = _status("VmRSS"), _cpu()
        try:
            with _address_space(AS_HEADROOM):
                if case.sweep is not None:
                    problems = run_sweep_case(case.sweep, where)
                    oom = False
                else:
                    wall = FIFO_WALL_S if case.fifos else fuzz_cases.WALL_SECONDS
                    rc, out, err, hung = fuzz_cases.run_cli_case(fuzz_cases.Case(case.argv, case.files), where, wall)
                    problems = fuzz_cases.judge_cli(fuzz_cases.Case(case.argv, case.files), where, rc, out, err, hung)
                    oom = "not enough memory" in err
        finally:
            for k, v in old_env.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        cpu = _cpu() - cpu0
        grew = (_status("VmHWM") - rss0) if peak_known else 0
    measures = {"bytes": nbytes, "cpu_s": round(cpu, 3), "rss_grew": grew}
    if cpu > bound_seconds(nbytes):
        problems.append(f"slow: {case.klass} seed {seed}: {cpu:.1f} s of CPU for {nbytes:,} bytes "
                        f"(bound {TIME_FLOOR_S:g} s + {TIME_PER_MB_S:g} s/MB = {bound_seconds(nbytes):.1f} s)")
    if grew > bound_bytes(nbytes) or oom:
        problems.append(f"memory: {case.klass} seed {seed}: peak RSS grew {grew / 2**20:.0f} MiB for {nbytes:,} bytes "
                        f"(bound {MEM_FLOOR >> 20} MiB + {MEM_PER_BYTE} B/byte = {bound_bytes(nbytes) / 2**20:.0f} MiB"
                        f"{'; ran out of its 1.5 GiB of address space' if oom else ''})")
    return case.klass, problems, measures


def quiet_run(seed: int, klass: str | None = None) -> tuple[str, list[str], dict]:
    """run_hostile with the engine's stray prints kept out of the harness's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        return run_hostile(seed, klass)
