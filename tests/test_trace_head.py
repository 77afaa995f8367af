"""trace/head.py: a trace named without ``{worker}.{time}`` is named from its head: distributedInfo's
rank, else host_name and pid, and its start time; a head that says nothing (or is hostile) gives the
name-based rule and the reason, reading a bounded number of bytes, never raising."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from tb_attn_plugin.trace import head
from tb_attn_plugin.trace.head import identify, parse_head
from tests.conftest import SHARED_TRACES, recorded_trace


def _recorded(role: str) -> str:
    return gzip.decompress(recorded_trace(role).read_bytes()).decode()


def test_a_recorded_trace_is_named_by_its_host_pid_and_start_time():
    text = _recorded("sdpa")
    doc = json.loads(text)
    h = parse_head(text)
    # What kineto wrote before the events, read without parsing the rest.
    assert h.host == doc["host_name"] and h.rank is None
    cpu = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert h.pid == cpu[0]["pid"]
    stamps = sorted({doc["baseTimeNanoseconds"] + round(e["ts"] * 1000)
                     for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float))})
    # The earliest event of the head, not of the whole file: one of the file's own event times (to the
    # rounding of a µs float), never before the file's earliest. (How far it is from the earliest
    # depends on the machine's load while recording, so the test does not bound that.)
    assert stamps[0] <= h.start_ns <= stamps[-1]
    assert min(abs(h.start_ns - t) for t in stamps) <= 1
    # A wall-clock time: within the last ten years of this machine's clock.
    assert time.time() - 10 * 365 * 86400 < h.start_ns / 1e9 <= time.time() + 60
    worker, span, note = head.name_from_head(h, "bert")
    assert worker == f"{doc['host_name']}_{h.pid}" and span == str(h.start_ns)
    assert "host_name and pid" in note and "start time" in note


@pytest.mark.skipif(not (SHARED_TRACES / "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph.json.gz").exists(),
                    reason="../shared/traces not present")
def test_the_shared_gpu_traces_say_what_their_heads_hold():
    got = {p.name: identify(str(p), "stem") for p in sorted(SHARED_TRACES.glob("*.json.gz"))}
    # FLUX.1 on an MI300X: kineto's head carries distributedInfo (rank 0 of 1) and baseTimeNanoseconds.
    worker, span, note = got["tl_mi300x_xdit_flux1_aiter_fmha_hipgraph.json.gz"]
    assert worker == "rank0" and span.isdigit() and "rank 0 of 1" in note
    # HTA's A100 trace: distributedInfo (rank 0 of 2) first, its base time written after the events.
    worker, span, note = got["hta_a100_negative_log_softmax_fwdbwd.json.gz"]
    assert (worker, span) == ("rank0", "stem") and "no baseTimeNanoseconds" in note
    # TraceLens rewrote its H100 traces with their metadata last: nothing in the head, the name rules.
    worker, span, note = got["tl_h100_bert_small_sdpa_flash.json.gz"]
    assert (worker, span) == ("stem", "") and "worker from the file name" in note


HOSTILE = {
    "text": (b"hello, world", "no traceEvents"),
    "empty": (b"", "empty"),
    "not_json_prelude": (b'{"a": [1, 2 "traceEvents": [', "not a JSON object's keys"),
    "deep": (b'{"a": ' + b"[" * 300_000 + b'"traceEvents": [', "no traceEvents"),  # past HEAD_BYTES
    "deep_short": (b'{"a": ' + b"[" * 50_000 + b"1" + b"]" * 50_000 + b', "traceEvents": [', "not a JSON"),
    "far": (b'{"pad": "' + b"x" * (2 * head.HEAD_BYTES) + b'", "traceEvents": []}', "no traceEvents"),
    "gzip_broken": (b"\x1f\x8b\x08\x00garbage", "does not inflate"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_head_falls_back_to_the_name_with_the_reason(tmp_path, kind):
    data, why = HOSTILE[kind]
    p = tmp_path / "x.pt.trace.json"
    p.write_bytes(data)
    worker, span, note = identify(str(p), "x")
    assert (worker, span) == ("x", "") and note.startswith("worker and span from the file name: ") and why in note


def test_hostile_fields_in_a_real_head_are_not_taken():
    doc = json.loads(_recorded("small"))
    for dist, host in [({"rank": "3"}, "../../etc"), ({"rank": True, "world_size": 2}, "a" * 200),
                       ({"rank": 5, "world_size": 2}, "bad host"), ({"rank": -1}, 7), ({"rank": 10**30}, None)]:
        d = {"schemaVersion": 1, "distributedInfo": dist, "host_name": host, "baseTimeNanoseconds": 10**30,
             "traceEvents": doc["traceEvents"]}
        h = parse_head(json.dumps(d))
        assert (h.rank, h.host, h.start_ns) == (None, None, None), (dist, host, h)
    for ts in (float("inf"), 1e300, -5, "1", True):
        d = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "pid": 1, "ts": ts, "dur": 1}]}
        assert parse_head(json.dumps(d)).start_ns is None


def test_a_gigabyte_file_is_named_from_a_bounded_read(tmp_path):
    """The listing reads HEAD_BYTES of JSON at most, so a file of any size is named in milliseconds:
    a 4 GiB sparse file (the recorded head, then holes) and a gzip stream of 1 GiB of blanks before its trace."""
    text = _recorded("small").encode()
    big = tmp_path / "big.pt.trace.json"
    with open(big, "wb") as f:
        f.write(text[: head.HEAD_BYTES // 2])
        f.truncate(4 << 30)
    t = time.perf_counter()
    worker, span, _ = identify(str(big), "big")
    assert span.isdigit() and time.perf_counter() - t < 1.0
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as f:
        for _ in range(64):
            f.write(b" " * (16 << 20))
        f.write(text)
    t = time.perf_counter()
    worker, span, note = identify(str(bomb), "bomb")
    assert (worker, span) == ("bomb", "") and "no traceEvents in its first 256 KiB" in note
    assert time.perf_counter() - t < 1.0
    fifo = tmp_path / "p.pt.trace.json"
    os.mkfifo(fifo)
    assert identify(str(fifo), "p")[:2] == ("p", "")  # refused from its stat, never opened to block


def test_mutated_real_traces_are_named_safely(tmp_path):
    """The fuzz harness's structure-aware mutations of the recorded (and shared) traces, plus hostile
    values in the head's own keys: identify never raises, answers fast, and names a worker and span
    that are the file's stem, a rank, a host and pid, or a start time in digits."""
    import random
    import re

    from tests.fuzz_cases import trace_text
    from tests.test_fuzz_structure import WEIRD_VALUES

    worker_ok = re.compile(r"^(stem|rank\d{1,7}|[A-Za-z0-9][A-Za-z0-9._-]{0,62}_\d+)$")
    for seed in range(150):
        rnd = random.Random(seed)
        text = trace_text(rnd)
        try:
            doc = json.loads(text)
        except ValueError:  # its 5,000-digit numbers (Python's integer-string limit): kept as text
            doc = None
        if isinstance(doc, dict) and rnd.random() < 0.5:
            key = rnd.choice(["distributedInfo", "host_name", "baseTimeNanoseconds"])
            value = rnd.choice(WEIRD_VALUES + [{"rank": rnd.choice(WEIRD_VALUES), "world_size": rnd.choice(WEIRD_VALUES)}])
            text = json.dumps({key: value, **{k: v for k, v in doc.items() if k != key}}, allow_nan=True)
        p = tmp_path / f"c{seed}.pt.trace.json"
        text = text.encode("utf-8", "surrogatepass")
        p.write_bytes(gzip.compress(text, 1) if seed % 3 == 0 else text)
        t = time.perf_counter()
        worker, span, note = identify(str(p), "stem")
        assert time.perf_counter() - t < 1.0, seed
        assert worker_ok.match(worker), (seed, worker)
        assert span in ("", "stem") or (span.isdigit() and len(span) <= 19), (seed, span)
        assert note and "\n" not in note, (seed, note)
