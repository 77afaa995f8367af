"""Bad input: one clear error naming the file and the cause, or a partial report with a warning;
never a traceback. A fuzzer mutates a real trace to find the cases nobody thought of."""

from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_attn_plugin.format.errors import TraceError
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.format.version import SCHEMA_VERSION
from tests.conftest import recorded_trace


@functools.lru_cache(maxsize=1)
def _small() -> bytes:
    return gzip.decompress(recorded_trace("small").read_bytes())


@pytest.fixture()
def small_trace() -> bytes:
    return _small()


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


@pytest.mark.parametrize("name,data,cause", [
    ("empty.pt.trace.json", b"", "empty file"),
    ("text.pt.trace.json", b"hello, world", "not JSON"),
    ("config.json", b'{"learning_rate": 0.1}', "not a trace"),
    ("numbers.json", b"[1, 2, 3]", "not a trace"),
    ("events-not-list.json", b'{"traceEvents": 7}', "not a trace"),
    ("broken.json", b'{"traceEvents": [{"ph": "X"', "truncated"),
])
def test_unusable_input_is_one_clear_error(tmp_path, name, data, cause):
    path = write(tmp_path, name, data)
    with pytest.raises(TraceError) as exc:
        analyze_file(path)
    msg = str(exc.value)
    assert msg.startswith(path + ": ") and cause in msg and "\n" not in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        analyze_file(str(tmp_path / "nope.json"))
    with pytest.raises(TraceError, match="is a directory"):
        analyze_file(str(tmp_path))


def test_truncated_json_reports_the_complete_events(tmp_path, small_trace):
    full = analyze_file(write(tmp_path, "full.json", small_trace))
    cut = small_trace[: int(len(small_trace) * 0.8)]
    r = analyze_file(write(tmp_path, "cut.pt.trace.json", cut))
    assert r["warnings"] and "ends early" in r["warnings"][0]
    assert 0 < r["trace"]["events"] < full["trace"]["events"]
    assert r["device"] == full["device"]  # fields before traceEvents survive


def test_truncated_gzip_reports_what_inflates(tmp_path, small_trace):
    gz = gzip.compress(small_trace)
    r = analyze_file(write(tmp_path, "cut.pt.trace.json.gz", gz[: int(len(gz) * 0.7)]))
    assert any("gzip stream ends early" in w for w in r["warnings"])
    assert r["trace"]["events"] > 0


def test_broken_gzip_is_an_error(tmp_path):
    with pytest.raises(TraceError, match="broken gzip stream"):
        analyze_file(write(tmp_path, "bad.json.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 64))


def test_mistyped_fields_skip_only_those_events(tmp_path, small_trace):
    doc = json.loads(small_trace)
    events = doc["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    ops[0]["ts"] = "yesterday"
    ops[1]["dur"] = "not a number"
    r = analyze_file(write(tmp_path, "typed.json", json.dumps(doc).encode()))
    assert r["warnings"] and "skipped 2 of" in r["warnings"][0]
    assert r["trace"]["events"] == len(events) - 2


def test_bare_array_form(tmp_path, small_trace):
    doc = json.loads(small_trace)
    r = analyze_file(write(tmp_path, "array.json", json.dumps(doc["traceEvents"]).encode()))
    gpu = any(e.get("cat") == "kernel" for e in doc["traceEvents"])
    # no deviceProperties: a trace with GPU kernels is an unknown GPU (never "CPU only"); a CPU trace has none
    assert r["calls"] == 1 and (r["device"]["name"] == "unknown GPU" if gpu else r["device"] is None)


def test_cli_exit_status_and_one_line(tmp_path, small_trace):
    good = write(tmp_path, "good.pt.trace.json", small_trace)
    bad = write(tmp_path, "bad.pt.trace.json", b"{not json")
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tb-attn: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"tb-attn: error: {bad}: corrupt JSON: ")
    assert good in proc.stdout and "attention: 1 call," in proc.stdout


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_trace_never_crashes(tmp_path, data):
    buf = bytearray(_small())
    for _ in range(data.draw(st.integers(1, 6))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[pos] = data.draw(st.sampled_from(b'{}[]",:0-9aeE.tfn \x00\xff'))
        elif kind == "cut":
            del buf[pos:]
        elif kind == "insert":
            buf[pos:pos] = data.draw(st.sampled_from([b'"x"', b"null", b"[", b"}", b'{"ph":1}', b"-1e999", b"\\u0000"]))
        elif buf:
            del buf[pos:pos + data.draw(st.integers(1, 200))]
    compress = data.draw(st.booleans())
    payload = gzip.compress(bytes(buf)) if compress else bytes(buf)
    path = write(tmp_path, "fuzz.json.gz" if compress else "fuzz.json", payload)
    try:
        r = analyze_file(path)
    except TraceError as exc:
        assert str(exc).startswith(path + ": ") and "\n" not in str(exc)
    else:
        assert r["schema_version"] == SCHEMA_VERSION and r["calls"] >= 0


def test_truncation_is_a_field_not_only_a_warning(tmp_path, small_trace):
    whole = analyze_file(write(tmp_path, "whole.json", small_trace))
    assert whole["trace"]["truncated"] is False
    cut = analyze_file(write(tmp_path, "cut.json", small_trace[: len(small_trace) * 3 // 4]))
    assert cut["trace"]["truncated"] is True
    gz = gzip.compress(small_trace)
    cut_gz = analyze_file(write(tmp_path, "cut.json.gz", gz[: len(gz) * 3 // 4]))
    assert cut_gz["trace"]["truncated"] is True


@pytest.mark.parametrize("inflater", ["isal", "stdlib"])
def test_gzip_whichever_inflates_it(tmp_path, small_trace, monkeypatch, inflater):
    """ISA-L (the [fast] extra) and the standard library give the same text, the same warning for a
    stream cut short and the same error for a broken one."""
    from tb_attn_plugin.trace import read

    if inflater == "isal":
        if read._fast_gzip is None:
            if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
                pytest.fail("isal is not installed (scripts/test.sh installs the [fast] extra)")
            pytest.skip("isal is not installed")
    else:
        monkeypatch.setattr(read, "_fast_gzip", None)
    gz = gzip.compress(small_trace)
    assert read.read_trace_text(str(write(tmp_path, "ok.json.gz", gz))) == (small_trace, [])
    text, warnings = read.read_trace_text(str(write(tmp_path, "cut.json.gz", gz[: len(gz) * 7 // 10])))
    assert small_trace.startswith(text) and 0 < len(text) < len(small_trace)
    assert warnings == ["gzip stream ends early (trace still being written, or a partial copy)"]
    with pytest.raises(TraceError, match="broken gzip stream"):
        read.read_trace_text(str(write(tmp_path, "bad.json.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 64)))
    two = gzip.compress(small_trace[:1000]) + gzip.compress(small_trace[1000:])  # two members, one file
    assert read.read_trace_text(str(write(tmp_path, "two.json.gz", two)))[0] == small_trace
