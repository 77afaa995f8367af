"""The streamed reader (trace/stream.py) gives exactly the whole-text path's events and report,
whatever the window and read sizes, plain or gzip (one member or several), from a path or an
fsspec URL; holds only a bounded window of text; and hands every file it does not understand
plainly back to the whole-text path, which judges it as before."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time

import msgspec
import numpy as np
import pytest

from tb_attn_plugin.attention.patterns import needs_shapes
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import events, native, rules, stream
from tb_attn_plugin.trace.read import read_trace_text
from tb_attn_plugin.table.arrays import Names
from tb_attn_plugin.trace.records import Table
from tests.conftest import shared_trace

pytestmark = pytest.mark.skipif(not stream.available() and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                                reason="the C scanner is not built (no compiler at install time)")
SIZES = [(4 << 20, 4 << 20), (997, 331), (64 << 10, 7777)]  # (window = rules.CHUNK_BYTES, read size)


def _strip(r):
    return {k: v for k, v in r.items() if k != "analysis_seconds"}


def _whole_events(path):
    text, warnings = read_trace_text(path)
    return events.decode(path, text, warnings, keep_shapes=needs_shapes), len(text)


def _whole_report(monkeypatch, path):
    with monkeypatch.context() as m:
        m.setattr(native, "streaming", False)
        return _strip(analyze_file(path))


def _enc(ev):
    # the columns gathered while decoding ([memory] instants are only those), as lists
    def hook(o):
        if isinstance(o, Table):
            return [o.fields] + [o[f].tolist() for f in o.fields]
        if isinstance(o, Names):
            return [o.values[i] for i in o.ids.tolist()]
        if isinstance(o, np.ndarray):  # the kernels' launch configurations (trace/launch_config.py)
            return o.tolist()
        return o
    # an op's shapes as their members, whether kept decoded or as the op's JSON (events.op_args)
    ev = msgspec.structs.replace(ev, op_shapes={k: events.op_args(v) for k, v in ev.op_shapes.items()})
    return msgspec.json.encode(ev, enc_hook=hook)


def _no_stream_threads():
    return not [t for t in threading.enumerate() if t.name == "tb-attn-stream"]


def test_the_scanner_streams_where_required():
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert stream.available(), "the built _scanner does not take streamed windows: rebuild it (setup.py build_ext)"


@pytest.mark.parametrize("window,read", SIZES)
def test_cpu_traces_stream_to_the_same_events(monkeypatch, cpu_traces, window, read):
    monkeypatch.setattr(rules, "CHUNK_BYTES", window)
    monkeypatch.setattr(stream, "READ_BYTES", read)
    for path in cpu_traces.values():
        want, size = _whole_events(str(path))
        got = stream.decode_file(str(path), needs_shapes)
        assert got is not None and got[1] == size
        assert _enc(got[0]) == _enc(want)
    assert _no_stream_threads()


def test_gzip_one_member_and_several_stream_to_the_same_report(monkeypatch, cpu_traces, tmp_path):
    src = cpu_traces["tagged"]
    text = src.read_bytes()
    one = tmp_path / "one.pt.trace.json.gz"
    one.write_bytes(gzip.compress(text))
    many = tmp_path / "many.pt.trace.json.gz"
    third = len(text) // 3
    many.write_bytes(b"".join(gzip.compress(text[i:j]) for i, j in ((0, third), (third, 2 * third), (2 * third, None))))
    monkeypatch.setattr(rules, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(stream, "READ_BYTES", 1000)
    want = _whole_report(monkeypatch, str(src))
    for p in (one, many):
        assert stream.decode_file(str(p), needs_shapes) is not None
        got = _strip(analyze_file(str(p)))
        assert {k: v for k, v in got.items() if k != "source"} == {k: v for k, v in want.items() if k != "source"}
        assert got["source"]["json_bytes"] == len(text)


def test_fsspec_urls_stream(monkeypatch, cpu_traces):
    fsspec = pytest.importorskip("fsspec")
    with fsspec.open("memory://stream/sdpa.pt.trace.json", "wb") as fh:
        fh.write(cpu_traces["sdpa"].read_bytes())
    got = stream.decode_file("memory://stream/sdpa.pt.trace.json", needs_shapes)
    assert got is not None and _enc(got[0]) == _enc(_whole_events(str(cpu_traces["sdpa"]))[0])


def test_only_a_bounded_window_is_held(monkeypatch, cpu_traces):
    """The scanner never sees more than about two windows and a read of text, however large the file."""
    path = str(cpu_traces["tagged"])
    size = os.path.getsize(path)
    window, read = 16 << 10, 4096
    monkeypatch.setattr(rules, "CHUNK_BYTES", window)
    monkeypatch.setattr(stream, "READ_BYTES", read)
    seen = []
    real = native.scan_window
    monkeypatch.setattr(native, "scan_window", lambda text, *a, **k: seen.append(len(text)) or real(text, *a, **k))
    assert stream.decode_file(path, needs_shapes) is not None
    assert len(seen) > size // (2 * window) and max(seen) <= 2 * window + read < size // 10


@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
                                  "hta_a100_negative_log_softmax_fwdbwd", "tl_mi300x_torch_compile_small"])
def test_shared_gpu_traces_stream_to_the_same_report(monkeypatch, name):
    path = str(shared_trace(name))  # skips where ../shared is absent: these are the real GPU layouts
    monkeypatch.setattr(rules, "CHUNK_BYTES", 256 << 10)
    assert stream.decode_file(path, needs_shapes) is not None
    assert _strip(analyze_file(path)) == _whole_report(monkeypatch, path)


def _doc(cpu_traces):
    return json.loads(cpu_traces["sdpa"].read_bytes())


@pytest.mark.parametrize("early", [False, True], ids=["", "begun_early"])
@pytest.mark.parametrize("case", ["gzip_cut", "bare_array", "after_array", "broken_mid_way", "mistyped_event",
                                  "in_a_string", "not_json", "empty"])
def test_what_is_not_plain_goes_to_the_whole_text_path(monkeypatch, cpu_traces, tmp_path, case, early):
    doc = _doc(cpu_traces)
    text = json.dumps(doc).encode()
    name = "t.pt.trace.json"
    if case == "gzip_cut":
        z = gzip.compress(text)
        data, name = z[: len(z) // 2], name + ".gz"
    elif case == "bare_array":
        data = json.dumps(doc["traceEvents"]).encode()
    elif case == "after_array":
        data = json.dumps(doc["traceEvents"]).encode() + b" [1]"
    elif case == "broken_mid_way":
        cut = text.index(b'}, {"ph"', len(text) // 2) + 1  # between two events, never inside a string
        data = text[:cut] + b"}}}]]]" + text[cut:]
    elif case == "mistyped_event":
        doc["traceEvents"][5]["ts"] = "soon"
        data = json.dumps(doc).encode()
    elif case == "in_a_string":  # the key spelled inside a string before the real one
        data = b'{"note": "\\"traceEvents\\": [", ' + text[1:]
    elif case == "not_json":
        data = b"hello"
    else:
        data = b""
    p = tmp_path / name
    p.write_bytes(data)
    monkeypatch.setattr(rules, "CHUNK_BYTES", 4096)
    if early:  # as the command line begins it (stream.start): what the scan met waits for decode_file
        stream.start(str(p))
    got = stream.decode_file(str(p), needs_shapes)
    assert _no_stream_threads() and not stream._begun
    if case in ("bare_array", "in_a_string"):
        # Plain after all: a bare array and a look-alike key in the head stream too, to the same events.
        assert got is not None and _enc(got[0]) == _enc(_whole_events(str(p))[0])
        return
    assert got is None
    # analyze_file then gives exactly what it gave before streaming existed: a report or the same error.
    try:
        want = ("ok", _whole_report(monkeypatch, str(p)))
    except Exception as exc:
        want = ("error", str(exc))
    try:
        have = ("ok", _strip(analyze_file(str(p))))
    except Exception as exc:
        have = ("error", str(exc))
    assert have == want


@pytest.mark.parametrize("name", ["sdpa", "tagged"])
def test_a_reading_begun_early_is_taken_over_with_the_same_events(monkeypatch, cpu_traces, name):
    """stream.start (the command line calls it before numpy is imported) reads and scans ahead on
    threads of its own; decode_file takes over the chunks scanned meanwhile and gives the events of
    a reading it began itself."""
    monkeypatch.setattr(rules, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(stream, "READ_BYTES", 4096)
    path = str(cpu_traces[name])
    want = stream.decode_file(path, needs_shapes)
    assert stream.start(path) and stream.start(path)  # one reading per path
    reading = stream._begun[path]
    deadline = time.monotonic() + 10
    while reading.chunks._q.qsize() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reading.chunks._q.qsize() >= 2  # scanned ahead, not taken yet
    got = stream.decode_file(path, needs_shapes)
    assert not stream._begun and _no_stream_threads() and reading.fh.closed
    assert got is not None and got[1] == want[1] and _enc(got[0]) == _enc(want[0])


def test_a_reading_begun_and_never_taken_is_stopped(cpu_traces):
    path = str(cpu_traces["sdpa"])
    assert stream.start(path)
    reading = stream._begun[path]
    stream.stop_begun()
    assert not stream._begun and _no_stream_threads() and reading.fh.closed


def test_the_command_line_reads_the_first_trace_ahead_and_leaves_no_thread(monkeypatch, cpu_traces, capsys):
    from tb_attn_plugin import cli

    begun = []
    real = stream.start
    monkeypatch.setattr(stream, "start", lambda p, k=None: begun.append(p) or real(p, k))
    path = str(cpu_traces["sdpa"])
    assert cli.main(["report", "--json", "-q", path, str(cpu_traces["tagged"])]) == 0
    assert begun == [path] and not stream._begun and _no_stream_threads()
    assert [r["source"]["path"] for r in json.loads(capsys.readouterr().out)["reports"]] == [path, str(cpu_traces["tagged"])]


def test_reading_and_scanning_import_no_numpy():
    """What the command line begins before the engine imports (stream.start) needs no numpy."""
    code = ("import sys, tb_attn_plugin.trace.stream as s; "
            "assert 'numpy' not in sys.modules, [m for m in sys.modules if m.startswith('numpy')][:3]")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.path.dirname(os.path.dirname(__file__)))


def test_a_reading_begun_with_other_shape_rules_is_not_taken_as_it_is(monkeypatch, cpu_traces):
    """A reading begun with other keep_shapes slimmed its windows by them: decode_file begins again
    (begun with none, no shapes were dropped, and it is taken with the caller's rules)."""
    monkeypatch.setattr(rules, "CHUNK_BYTES", 8192)
    path = str(cpu_traces["sdpa"])
    want = stream.decode_file(path, needs_shapes)
    assert want[0].op_shapes  # the attention ops' shapes are read
    for begun_with in (lambda name: False, None):
        assert stream.start(path, begun_with)
        deadline = time.monotonic() + 10
        ahead = stream._begun[path].chunks
        # a few windows scanned (and slimmed) by the begun rules, or all of them: this trace may have
        # fewer than 3 (the wait then ran out its 10 s, twice: 20 s of the suite)
        while ahead._q.qsize() < 3 and ahead._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        got = stream.decode_file(path, needs_shapes)
        assert _enc(got[0]) == _enc(want[0]) and not stream._begun and _no_stream_threads()
