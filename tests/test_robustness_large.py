"""A trace with a million events, built in the test from a real one, analysed in full.

A small real trace the suite records (tests/recorded.py "small": one SDPA call, CPU ops) is repeated as separate
steps, each copy shifted past the previous one in time and given fresh correlation, External id and
flow ids (as bench/make_trace.py does), until the file holds over a million events. The report must
count every copy: the events, the ops, the attention calls and their CPU time.
"""

from __future__ import annotations

import gzip

import msgspec
import orjson
import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.samples import MAX_SAMPLES

TARGET = 1_000_000
ID_ARGS = ("correlation", "External id")


def build(path, src_bytes: bytes, target: int) -> tuple[int, int]:
    doc = orjson.loads(src_bytes)
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]  # process and thread names: once, not per copy
    body = [e for e in events if e.get("ph") != "M"]
    timed = [e for e in body if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000.0
    id_step = 1 + max([e.get("args", {}).get(k, 0) for e in body for k in ID_ARGS
                       if isinstance(e.get("args", {}).get(k, 0), int)] + [e.get("id", 0) for e in body
                                                                          if isinstance(e.get("id"), int)])
    copies = -(-(target - len(meta)) // len(body))
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(head)[:-1] + b',"traceEvents":[')
        fh.write(b",".join(orjson.dumps(e) for e in meta))
        for c in range(copies):
            dt, di = c * span, c * id_step
            out = []
            for e in body:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] += dt
                if isinstance(e2.get("id"), int):
                    e2["id"] += di
                if isinstance(e2.get("args"), dict):
                    a = e2["args"] = dict(e2["args"])
                    for k in ID_ARGS:
                        if isinstance(a.get(k), int):
                            a[k] += di
                out.append(e2)
            fh.write(b"," + orjson.dumps(out)[1:-1])
        fh.write(b"]}")
    return copies, len(meta) + copies * len(body)


@pytest.fixture(scope="module")
def million(tmp_path_factory, recorded_traces):
    src = gzip.decompress((recorded_traces / "small.json.gz").read_bytes())
    one = analyze_file(str(recorded_traces / "small.json.gz"))
    path = tmp_path_factory.mktemp("million") / "big.pt.trace.json"
    copies, events = build(path, src, TARGET)
    yield path, copies, events, one
    path.unlink()


def test_a_million_events_are_all_counted(million):
    path, copies, events, one = million
    assert events >= TARGET
    r = analyze_file(str(path))
    assert r["warnings"] == []
    assert r["trace"]["events"] == events
    assert r["time_basis"] == one["time_basis"] == "cpu"
    assert r["trace"]["ops"] == copies * one["trace"]["ops"]
    assert r["calls"] == copies * one["calls"] == copies
    assert r["attention_cpu_us"] == pytest.approx(copies * one["attention_cpu_us"], rel=1e-6)
    assert r["total_cpu_us"] == pytest.approx(copies * one["total_cpu_us"], rel=1e-6)
    assert r["attention_share"] == pytest.approx(one["attention_share"], abs=1e-5)
    fused = [k for k in r["ops"] if k["stage"] == "fused" and k["name"] == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    assert sum(k["count"] for k in fused) == copies
    # Samples stay bounded: one sample per call up to the cap.
    assert len(r["call_samples"]) == min(MAX_SAMPLES, copies)
    assert len(orjson.dumps(msgspec.to_builtins(r))) < 64 << 20  # what the plugin stores and sends for this file
