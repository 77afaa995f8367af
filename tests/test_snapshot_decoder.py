"""The C snapshot decoder (memory/_snapshot_decode.c) against the plain unpickler: the same report
for every plain snapshot, a fallback (never a different answer) for anything it does not take, and
no crash on damaged bytes."""

from __future__ import annotations

import gzip
import json
import os
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_attn_plugin.format.errors import TraceError
from tb_attn_plugin.memory import engine, fast_pickle
from tests.memory_snapshots import known_snapshot, malicious_pickle

needs_decoder = pytest.mark.skipif(not fast_pickle.available() and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                                   reason="the C snapshot decoder is not built (no compiler at install time)")
pytestmark = needs_decoder
PROTOCOLS = (2, 3, 4, 5)


def report(path, fast=True):
    """The memory section (without its timing) or the one-line error, through one loader."""
    saved = fast_pickle.Decoder
    if not fast:
        fast_pickle.Decoder = None
    try:
        return engine.snapshot_section(str(path))
    except TraceError as exc:
        return f"error: {exc}"
    finally:
        fast_pickle.Decoder = saved


def same_both_ways(path):
    fast, plain = report(path), report(path, fast=False)
    assert json.dumps(fast, sort_keys=True) == json.dumps(plain, sort_keys=True)
    return fast


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_known_snapshot_decodes_to_columns_and_the_same_report(tmp_path, protocol):
    doc, expected = known_snapshot()
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(doc, protocol=protocol))
    got = fast_pickle.load(str(p))
    assert got is not None  # taken by the decoder, not left to the unpickler
    body, rows = got
    assert body["device_traces"] == [[]] and len(rows[0]) == len(doc["device_traces"][0])
    sec = same_both_ways(p)
    assert sec["peak_bytes"] == expected["peak"]


def test_gzip_snapshot_and_windows_cut_anywhere(tmp_path, monkeypatch):
    doc, _ = known_snapshot()
    data = pickle.dumps(doc, protocol=4)
    p = tmp_path / "s.pickle.gz"
    p.write_bytes(gzip.compress(data))
    assert fast_pickle.load(str(p)) is not None
    same_both_ways(p)
    # Windows of a few bytes: every opcode is cut by a window's end somewhere.
    monkeypatch.setattr("tb_attn_plugin.trace.stream.READ_BYTES", 7)
    q = tmp_path / "s.pickle"
    q.write_bytes(data)
    assert fast_pickle.load(str(q)) is not None
    same_both_ways(q)


def test_shared_frame_lists_and_dicts_as_torch_writes_them(tmp_path):
    """torch symbolizes each traceback once: entries (and blocks) share frame lists and frame dicts."""
    frames = [{"filename": "/x/torch/nn/functional.py", "line": 1, "name": "softmax"},
              {"filename": "/home/u/model.py", "line": 9, "name": "forward"}]
    trace = [{"action": "alloc", "addr": 4096 * i, "size": 512, "stream": 0, "time_us": i, "frames": frames}
             for i in range(50)]
    trace += [{"action": "free_completed", "addr": 4096 * i, "size": 512, "stream": 0, "time_us": 60 + i,
               "frames": frames} for i in range(50)]
    doc = {"segments": [{"device": 0, "total_size": 1 << 20, "blocks": [
        {"address": 0, "size": 512, "state": "active_allocated", "frames": frames}]}], "device_traces": [trace]}
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(doc))
    _, rows = fast_pickle.load(str(p))
    assert {rows[0].frame_text(i) for i in range(100)} == {"model.py:9 forward"}
    same_both_ways(p)


@pytest.mark.parametrize("where", ["a later list", "the same batch of appends"])
def test_a_shared_entry_is_refused_both_ways(tmp_path, where):
    # The same dict twice: pickled once, then referenced. torch writes each entry once; a reference
    # (2 bytes) that costs a row each time is refused by the decoder and by the plain path alike.
    doc, _ = known_snapshot()
    trace = doc["device_traces"][0]
    if where == "a later list":
        doc["device_traces"].append([trace[1]])
    else:
        trace.append(trace[1])
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(doc))
    out = same_both_ways(p)
    assert out.startswith("error: ") and "referenced" in out and "\n" not in out


@pytest.mark.parametrize("what", ["entry outside device traces", "set", "stray item"])
def test_what_the_decoder_does_not_take_goes_to_the_unpickler(tmp_path, what):
    doc, _ = known_snapshot()
    trace = doc["device_traces"][0]
    if what == "entry outside device traces":
        doc["segments"][0]["blocks"].append({"action": "alloc", "size": 1})
    elif what == "set":
        doc["allocator_settings"] = {"x": {1, 2}}
    else:
        trace.append(["not", "an", "entry"])
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(doc))
    assert fast_pickle.load(str(p)) is None
    same_both_ways(p)


def test_globals_are_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    p = tmp_path / "evil.pickle"
    p.write_bytes(malicious_pickle(str(marker)))
    assert fast_pickle.load(str(p)) is None
    out = report(p)
    assert out.startswith("error: ") and "refused" in out and not marker.exists()


def test_every_truncation_is_one_line(tmp_path):
    data = pickle.dumps(known_snapshot()[0], protocol=4)
    p = tmp_path / "cut.pickle"
    for cut in range(1, len(data), max(1, len(data) // 97)):
        p.write_bytes(data[:cut])
        out = same_both_ways(p)
        assert isinstance(out, str) and out.startswith("error: ") and "\n" not in out


_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=6), st.binary(max_size=4),
                    st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                                     "segment_map", "oom", "/a/torch/x.py", "??", "model.py"]))
_frame = st.fixed_dictionaries({}, optional={"filename": _scalar, "line": _scalar, "name": _scalar})
_entry = st.fixed_dictionaries({"action": st.one_of(st.sampled_from(["alloc", "free_completed", "free_requested",
                                                                     "segment_alloc", "oom"]), st.text(max_size=3))},
                               optional={"addr": _scalar, "size": st.one_of(st.integers(-5, 1 << 40), _scalar),
                                         "stream": _scalar, "time_us": st.one_of(st.integers(0, 10**6), _scalar),
                                         "frames": st.one_of(st.lists(_frame, max_size=4), _scalar),
                                         "device_free": _scalar})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces=st.lists(st.lists(_entry, max_size=10), max_size=3), share=st.integers(0, 3),
       protocol=st.sampled_from(PROTOCOLS))
def test_any_plain_snapshot_reports_the_same_both_ways(tmp_path_factory, traces, share, protocol):
    # Share frame lists between entries now and then, as torch does.
    flat = [e for t in traces for e in t if isinstance(e.get("frames"), list)]
    for a, b in zip(flat[::2], flat[1::2]):
        if share and len(a) % share == 0:
            b["frames"] = a["frames"]
    p = tmp_path_factory.mktemp("snap") / "s.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "device_traces": traces}, protocol=protocol))
    same_both_ways(p)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_bytes_never_crash(tmp_path_factory, data):
    raw = bytearray(pickle.dumps(known_snapshot()[0], protocol=data.draw(st.sampled_from(PROTOCOLS))))
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(2, len(raw) - 1))] = data.draw(st.integers(0, 255))
    p = tmp_path_factory.mktemp("bad") / "s.pickle"
    p.write_bytes(bytes(raw))
    out = report(p)
    if isinstance(out, str):
        assert out.startswith("error: ") and "\n" not in out
    else:
        json.dumps(out, allow_nan=False)
