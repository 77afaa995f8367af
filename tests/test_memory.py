"""Memory: profiler [memory] events of real CPU traces and snapshot pickles, engine and CLI."""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.format.errors import TraceError
from tb_attn_plugin.memory import engine, safe_pickle
from tb_attn_plugin.memory.timeline import downsample
from tb_attn_plugin.report.build import analyze_file
from tests import cpu_models
from tests.memory_snapshots import known_snapshot, malicious_pickle

REPO = Path(__file__).resolve().parent.parent
SCORE_CPU = cpu_models.B * cpu_models.HEADS * cpu_models.L * cpu_models.L * 4  # fp32 B·H·L·L


def cli(*args, cwd=None):
    env_path = str(REPO)
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})


def raw_memory_events(path: Path) -> list[dict]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [e for e in json.loads(data)["traceEvents"] if e.get("name") == "[memory]"]


# --- real CPU traces ---------------------------------------------------------------------------

def test_eager_score_matrix_blocks_are_exactly_b_h_l_l_4(cpu_traces):
    mem = analyze_file(str(cpu_traces["eager"]))["memory"]
    assert mem["source"] == "profiler" and mem["device"] == "cpu"
    assert {lay["score_bytes"] for lay in mem["layers"]} == {SCORE_CPU}
    # The raw trace holds these blocks: every flagged one is an allocation of exactly SCORE_CPU bytes.
    raw_blocks = sum(1 for e in raw_memory_events(cpu_traces["eager"]) if e["args"]["Bytes"] == SCORE_CPU)
    flagged = mem["score_matrix"]["blocks"]
    assert 0 < flagged <= raw_blocks
    assert mem["score_matrix"]["bytes_total"] == flagged * SCORE_CPU
    # Forward of each call: QKᵀ, the scaled scores, softmax and dropout each write one score matrix.
    fwd = {(s["stage"]): s["score_matrix_blocks"] for s in mem["stages"] if s["pass"] == "fwd"}
    calls = len(mem["calls"])
    assert fwd.get("qk_matmul", 0) >= calls and fwd.get("softmax", 0) >= calls and fwd.get("dropout", 0) >= calls
    for row in mem["calls"]:
        assert row["score_matrix_bytes"] >= 4 * SCORE_CPU and row["peak_growth_bytes"] >= SCORE_CPU


def test_math_backend_materialises_the_score_matrix_and_fused_sdpa_none(cpu_traces):
    assert analyze_file(str(cpu_traces["math"]))["memory"]["score_matrix"]["blocks"] > 0
    sdpa = analyze_file(str(cpu_traces["sdpa"]))["memory"]
    assert sdpa["score_matrix"] == {"blocks": 0, "bytes_total": 0, "bytes_per_call_max": 0}
    assert sdpa["events"] > 0 and sdpa["peak_bytes"] > 0


@pytest.mark.parametrize("mode", ["eager", "sdpa", "math"])
def test_peak_is_the_profilers_total_allocated_maximum(cpu_traces, mode):
    events = raw_memory_events(cpu_traces[mode])
    r = analyze_file(str(cpu_traces[mode]))
    mem = r["memory"]
    assert mem["peak_bytes"] == max(e["args"]["Total Allocated"] for e in events)
    assert mem["events"] == sum(1 for e in events if e["args"]["Bytes"])
    # Pairing: every free finds its allocation in a whole profiled window.
    assert mem["churn"]["allocs"] + mem["churn"]["frees"] == mem["events"]
    assert max(mem["curve"]["bytes"]) == mem["peak_bytes"] and len(mem["curve"]["t_us"]) <= 3000
    p = mem["peak"]
    assert p["bytes"] == mem["peak_bytes"] and p["explanation"].startswith("peak ")
    assert sum(row["bytes"] for row in p["live"]) + p["before_record_bytes"] <= p["bytes"] + 1
    # The layer table's memory_bytes is the memory section's peak growth.
    growth = {lay["layer"]: lay["peak_growth_bytes"] for lay in mem["layers"]}
    assert all(lay.memory_bytes == growth[lay.layer] for lay in r["layers"] if lay.memory_bytes is not None)


def test_the_running_sum_agrees_with_total_allocated(cpu_traces):
    """Without Total Allocated, the live curve is the running sum of Bytes: the same peak growth."""
    from tb_attn_plugin.memory import profiler_events
    from tb_attn_plugin.trace.events import decode

    from tb_attn_plugin.trace import native

    from tb_attn_plugin.trace.records import NULL

    with pytest.MonkeyPatch.context() as m:
        m.setattr(native, "available", False)  # the columns read from decoded Events
        ev = decode("t", cpu_traces["eager"].read_bytes())
    tl = profiler_events.timelines(ev.memory)["cpu"]
    assert tl == profiler_events.timelines(decode("t", cpu_traces["eager"].read_bytes()).memory)["cpu"]  # records
    ev.memory["nulls"][:] |= NULL["total_allocated"]  # no Total Allocated anywhere
    tl2 = profiler_events.timelines(ev.memory)["cpu"]
    assert tl2.total is None
    base = tl.live[0] - tl.delta[0]
    assert [x + base for x in tl2.live] == list(tl.live)


def test_backward_allocations_join_their_forward_layer(cpu_traces):
    mem = analyze_file(str(cpu_traces["eager"]))["memory"]
    bwd = [s for s in mem["stages"] if s["pass"] == "bwd"]
    assert bwd and sum(s["bytes_allocated"] for s in bwd) > 0
    # The score matrix's gradient is allocated in backward of the same layers.
    assert any(s["score_matrix_blocks"] for s in bwd)
    assert {row["layer"] for row in mem["calls"] if row["bwd_bytes_allocated"]} == {lay["layer"] for lay in mem["layers"]}


def test_a_trace_without_memory_events_says_how_to_record_them(cpu_traces, tmp_path):
    doc = json.loads(cpu_traces["eager"].read_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "[memory]"]
    p = tmp_path / "nomem.pt.trace.json"
    p.write_text(json.dumps(doc))
    assert analyze_file(str(p))["memory"] is None
    out = cli("report", p, "-q")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "memory:" in ln)
    assert "profile_memory=True" in line and "memory=True" in line


# --- snapshots ---------------------------------------------------------------------------------

def test_snapshot_with_a_known_peak(tmp_path):
    snap, want = known_snapshot()
    p = tmp_path / "host_1.1700000000.memory.pickle"
    p.write_bytes(pickle.dumps(snap))
    r = engine.snapshot_report(str(p))
    mem = r["memory"]
    assert mem["source"] == "snapshot" and mem["device"] == "cuda:0"
    assert mem["peak_bytes"] == want["peak"]
    peak = mem["peak"]
    assert (peak["layer"], peak["stage"]) == (want["layer"], want["stage"])
    assert peak["score_matrix_bytes"] == 2 * want["score"] and peak["before_record_bytes"] == 3 << 20
    assert peak["reserved_bytes"] == want["reserved_at_peak"]
    assert peak["reserved_minus_allocated"] == want["reserved_at_peak"] - want["peak"]
    assert "softmax of model.layers.7.self_attn" in peak["explanation"] and "2 score-matrix blocks" in peak["explanation"]
    assert any(row["frame"] == "model.py:7 forward" for row in peak["live"])
    ch = mem["churn"]
    assert (ch["segment_allocs"], ch["segment_frees"], ch["flush_retries"]) == (2, 1, 1)
    assert ch["ooms"] == [{"time_us": 45.0, "bytes": 1 << 40, "device_free": 123, "layer": want["layer"]}]
    assert mem["score_matrix"]["blocks"] == 2
    out = cli("report", p)
    assert out.returncode == 0 and "peak 5.0 MiB in the softmax of model.layers.7.self_attn" in out.stdout, out


def test_snapshot_beside_a_trace_joins_its_report(cpu_traces, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    trace = run / "host_1.1700000000.pt.trace.json"
    trace.write_bytes(cpu_traces["eager"].read_bytes())
    snap, want = known_snapshot()
    (run / "host_1.1700000000.memory.pickle").write_bytes(pickle.dumps(snap))
    r = analyze_file(str(trace))
    assert r["memory"]["source"] == "profiler"
    assert r["memory"]["snapshot_section"]["peak_bytes"] == want["peak"]
    out = cli("report", run, "-q")
    assert out.returncode == 0 and "memory snapshot:" in out.stdout


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "PWNED"
    p = tmp_path / "evil.pickle"
    p.write_bytes(malicious_pickle(str(marker)))
    out = cli("report", p)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "refused" in out.stderr and "system" in out.stderr
    assert "Traceback" not in out.stderr and not marker.exists()
    # Beside a trace it is a warning in that trace's report, and still never runs.
    run = tmp_path / "run"
    run.mkdir()
    (run / "w.1.memory.pickle").write_bytes(p.read_bytes())
    with pytest.raises(TraceError, match="refused"):
        safe_pickle.load_plain(str(run / "w.1.memory.pickle"))
    assert not marker.exists()


@pytest.mark.parametrize("cut", [1, 2, 10, 0.5, -1])
def test_truncated_pickles_get_one_line(tmp_path, cut):
    data = pickle.dumps(known_snapshot()[0])
    n = int(len(data) * cut) if isinstance(cut, float) else (cut if cut > 0 else len(data) + cut)
    p = tmp_path / "cut.pickle"
    p.write_bytes(data[:n])
    out = cli("report", p)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert str(p) in out.stderr and ("truncated" in out.stderr or "not a pickle" in out.stderr)


@pytest.mark.parametrize("doc, why", [
    ([1, 2, 3], "not a CUDA memory snapshot"),
    ({"hello": "world"}, "not a CUDA memory snapshot"),
    ({"segments": [], "device_traces": [[]]}, "no allocation history"),
    ({"segments": [], "device_traces": "nope"}, "not a list"),
])
def test_foreign_and_empty_snapshots(tmp_path, doc, why):
    p = tmp_path / "x.pickle"
    p.write_bytes(pickle.dumps(doc))
    out = cli("report", p)
    assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr


def test_not_a_pickle_and_oversized(tmp_path, monkeypatch):
    p = tmp_path / "x.pickle"
    p.write_bytes(b'{"json": "not a pickle"}')
    with pytest.raises(TraceError, match="not a pickle"):
        safe_pickle.load_plain(str(p))
    monkeypatch.setattr(safe_pickle, "MAX_SNAPSHOT_BYTES", 10)
    p.write_bytes(pickle.dumps(known_snapshot()[0]))
    with pytest.raises(TraceError, match="over the"):
        safe_pickle.load_plain(str(p))


def test_a_bad_snapshot_limit_is_one_line(tmp_path, monkeypatch):
    p = tmp_path / "x.pickle"
    p.write_bytes(pickle.dumps(known_snapshot()[0]))
    monkeypatch.setenv("TB_ATTN_MAX_SNAPSHOT_MB", "lots")
    with pytest.raises(TraceError, match="TB_ATTN_MAX_SNAPSHOT_MB='lots' is not a whole number"):
        safe_pickle.load_plain(str(p))
    monkeypatch.setenv("TB_ATTN_MAX_SNAPSHOT_MB", "0")
    with pytest.raises(TraceError, match="over the 0 MiB limit"):
        safe_pickle.load_plain(str(p))


def test_a_directory_of_snapshots_without_traces(tmp_path):
    snap, want = known_snapshot()
    (tmp_path / "a.memory.pickle").write_bytes(pickle.dumps(snap))
    out = cli("report", tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["reports"][0]["kind"] == "memory_snapshot" and doc["reports"][0]["memory"]["peak_bytes"] == want["peak"]


# --- compare, downsampling, schema -------------------------------------------------------------

def test_compare_prints_memory_deltas(cpu_traces):
    out = cli("compare", cpu_traces["eager"], cpu_traces["sdpa"], "-q")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("memory:"))
    assert "peak" in line and "score-matrix bytes" in line
    from tb_attn_plugin.report.compare import compare_reports

    c = compare_reports([("eager", analyze_file(str(cpu_traces["eager"]))),
                         ("sdpa", analyze_file(str(cpu_traces["sdpa"])))])["memory"]
    assert c["peak_delta_bytes"] < 0 and c["score_matrix_bytes"][1] == 0 < c["score_matrix_bytes"][0]


def test_downsampling_keeps_every_peak_and_bounds_points():
    import random

    rnd = random.Random(1)
    t = list(range(200_000))
    v = [rnd.randrange(1000) for _ in t]
    v[123_457] = 10_000  # a one-event spike
    v[5] = -5
    times, values, idx = downsample(t, v, 600)
    assert len(times) <= 602 and 10_000 in values and -5 in values
    assert idx == sorted(idx) and times[0] == 0 and times[-1] == t[-1]
    small = downsample([0, 1, 2], [5, 6, 7], 600)
    assert small[1] == [5, 6, 7]
    # two buckets, [0, 6) and [6, 12): each keeps its first point and the first of its equal lows and highs
    ties = downsample(list(range(12)), [3, 1, 1, 5, 5, 2, 2, 2, 9, 0, 9, 0], 6)
    assert ties[2] == [0, 1, 3, 6, 8, 9, 11] and ties[1] == [3, 1, 5, 2, 9, 0, 0]


def test_memory_sections_validate(cpu_traces, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources

    schema = json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text())
    jsonschema.validate(msgspec.json.decode(msgspec.json.encode(analyze_file(str(cpu_traces["eager"])))), schema)
    snap, _ = known_snapshot()
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(snap))
    memory_schema = {"$defs": schema["$defs"], "$ref": "#/$defs/MemorySection"}
    jsonschema.validate(engine.snapshot_report(str(p))["memory"], memory_schema)
    broken = engine.snapshot_report(str(p))["memory"]
    broken["peak_bytes"] = "a lot"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, memory_schema)


# --- hostile structure: anything plain that a pickle can hold ----------------------------------

from hypothesis import HealthCheck  # noqa: E402

_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.just(float("inf")),
                    st.text(max_size=8), st.sampled_from(["alloc", "free_requested", "free_completed", "segment_alloc",
                                                          "segment_free", "oom", "START", "END", "active_allocated"]))
_plain = st.recursive(_scalar, lambda c: st.one_of(st.lists(c, max_size=4),
                                                   st.dictionaries(st.sampled_from(
                                                       ["action", "addr", "size", "stream", "time_us", "frames", "name",
                                                        "stage", "device", "blocks", "state", "total_size", "x"]), c,
                                                       max_size=6)), max_leaves=20)
_entry = st.fixed_dictionaries({"action": _scalar, "addr": _scalar, "size": _scalar}, optional={
    "stream": _scalar, "time_us": _scalar, "frames": _plain, "device_free": _scalar})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces=st.lists(st.lists(st.one_of(_entry, _plain), max_size=12), max_size=3), segments=_plain, ann=_plain,
       settings_=_plain)
def test_any_plain_snapshot_gives_a_section_or_one_clear_error(traces, segments, ann, settings_):
    from tb_attn_plugin.memory import snapshot as snap

    doc = {"device_traces": traces, "segments": segments, "external_annotations": ann, "allocator_settings": settings_}
    try:
        s = snap.parse(doc, path="fuzz.pickle")
    except TraceError as exc:
        assert str(exc).startswith("fuzz.pickle: ") and "\n" not in str(exc)
        return
    for rec in s.devices.values():
        assert len(rec.timeline.live) == len(rec.timeline.t) and min(rec.timeline.live, default=0) >= 0
    # The whole section builds too (through the pickle round trip the CLI takes).
    data = pickle.dumps(doc)
    path = Path(safe_pickle.__file__).parent  # any directory; the file goes to a temp one below
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "f.pickle"
        p.write_bytes(data)
        try:
            mem = engine.snapshot_report(str(p))["memory"]
        except TraceError as exc:
            assert "\n" not in str(exc)
            return
        json.dumps(mem, allow_nan=False)  # JSON-ready: no NaN or infinity anywhere
        assert mem["peak_bytes"] >= 0 and len(mem["curve"]["t_us"]) == len(mem["curve"]["bytes"])
    del path


def test_absurd_sizes_are_refused_not_crashed(tmp_path, cpu_traces):
    snap, _ = known_snapshot()
    snap["device_traces"][0] = [{"action": "alloc", "addr": i, "size": (1 << 56) - 1, "stream": 0, "time_us": i}
                                for i in range(300)]
    p = tmp_path / "big.pickle"
    p.write_bytes(pickle.dumps(snap))
    with pytest.raises(TraceError, match="beyond any real memory"):
        engine.snapshot_report(str(p))
    doc = json.loads(cpu_traces["eager"].read_bytes())
    mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    for e in mem:
        e["args"]["Bytes"] = (1 << 56) - 1
        e["args"].pop("Total Allocated")
    t = tmp_path / "big.pt.trace.json"
    t.write_text(json.dumps(doc))
    r = analyze_file(str(t))
    assert r["memory"] is None and any("beyond any real memory" in w for w in r["warnings"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.0, 2.5, 4.0]), st.integers(0, 2)), max_size=30),
       st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.0, 3.0]), st.sampled_from([0.0, 0.5, 1.0, 2.0]),
                          st.integers(0, 3), st.integers(0, 3), st.integers(-1, 2)), max_size=25))
def test_innermost_is_the_loop_over_call_ops(events, ops):
    """Random events on three threads against random call ops (ties in time and depth, empty
    windows, ops on a thread without events): each event goes to the deepest op whose window on
    its thread holds it, the first of equally deep ones, as one loop over the ops in order gives;
    in batches of a few (op, event) pairs too."""
    import bisect
    from array import array
    from types import SimpleNamespace

    from tb_attn_plugin.memory import attribute
    from tb_attn_plugin.memory.timeline import Timeline

    events = sorted(events, key=lambda e: e[0])  # a finished timeline is in time order
    tl = Timeline("cpu", t=array("d", [t for t, _ in events]), thread=array("q", [th for _, th in events]),
                  threads=[("1", "10"), ("1", "11"), ("1", "12")])
    blocks = [(1, 10), (1, 11), (1, 13)]  # the third link thread has no memory events
    L = SimpleNamespace(ts=array("d", [o[0] for o in ops]), dur=array("d", [o[1] for o in ops]),
                        thread=array("q", [o[2] % 3 for o in ops]), threads=blocks,
                        depth=array("q", [o[3] for o in ops]))
    block_thread = array("q", [0, 1, -1])
    in_calls = list(range(len(ops)))
    winner, best, touched = [-1] * len(events), [-1] * len(events), []
    for j in in_calls:
        k = block_thread[L.thread[j]]
        mine = [i for i, (_, th) in enumerate(events) if th == k] if k >= 0 else []
        times = [events[i][0] for i in mine]
        a, b = bisect.bisect_left(times, L.ts[j]), bisect.bisect_right(times, L.ts[j] + L.dur[j])
        if a < b:
            touched.append(j)
        for i in mine[a:b]:
            if L.depth[j] > best[i]:
                best[i], winner[i] = L.depth[j], j
    for batch in (attribute.PAIRS_PER_BATCH, 3):
        saved, attribute.PAIRS_PER_BATCH = attribute.PAIRS_PER_BATCH, batch
        try:
            got = attribute._innermost(tl, L, in_calls, block_thread)
        finally:
            attribute.PAIRS_PER_BATCH = saved
        assert (list(got[0]), got[1]) == (winner, touched)
