"""The C scanner that drops unused events before decoding (tb_attn_plugin/trace/_scanner.c)
changes speed only: with and without it, every trace gives the same events and the same report,
and on text it does not understand it hands the chunk back undecided instead of guessing."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import events, native, rules
from tb_attn_plugin.trace.records import JSON, REC
from tests.conftest import shared_trace

scan = native._scan_events
needs_native = pytest.mark.skipif(scan is None and not os.environ.get("TB_ATTN_REQUIRE_NATIVE"),
                                  reason="the C scanner is not built (no compiler at install time)")
RULES = events._PREFILTER_RULES
SHARED = ["tl_h100_owlv2_eager_bmm_softmax", "tl_h100_bert_small_sdpa_flash", "tl_mi300x_bert_small_sdpa_aotriton",
          "tl_mi300x_torch_compile_small", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
          "hta_a100_negative_log_softmax_fwdbwd"]


def test_the_scanner_is_built_where_required():
    # scripts/test.sh sets this: CI must test the fast path, not silently skip it.
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
        assert native.available, "tb_attn_plugin/trace/_scanner.c was not compiled (pip install -e . needs gcc)"


def _without_scanner(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(native, "available", False)
        return fn()


def _strip(r):
    r = dict(r)
    r.pop("analysis_seconds", None)
    return r


def _chunk(values: list[str], sep: str = ",") -> bytes:
    return sep.join(values).encode()


def _scan(values: bytes):
    """The scanner over one array holding ``values``, in one chunk."""
    text = b"[" + values + b"]"
    out, dropped, nxt, done = scan(text, 1, 1 << 40, *RULES)
    if out is not None:
        assert done and nxt == len(text) - 1
    return out, dropped


@needs_native
@pytest.mark.parametrize("name", SHARED)
def test_real_traces_give_the_same_events_and_report(monkeypatch, name):
    path = str(shared_trace(name))
    fast = _strip(analyze_file(path))
    plain = _strip(_without_scanner(monkeypatch, lambda: analyze_file(path)))
    assert fast == plain
    assert fast["trace"]["events"] > 0


@needs_native
@pytest.mark.parametrize("name", ["tl_h100_owlv2_eager_bmm_softmax", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"])
def test_small_chunks_scanned_on_a_second_thread_change_nothing(monkeypatch, name):
    path = str(shared_trace(name))
    plain = _strip(_without_scanner(monkeypatch, lambda: analyze_file(path)))
    monkeypatch.setattr(native, "streaming", False)  # this is about the whole-text path (tests/test_stream.py: the other)
    monkeypatch.setattr(native, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(rules, "CHUNK_BYTES", 64 << 10)
    chunks = []
    real = native._scan_events
    monkeypatch.setattr(native, "_scan_events", lambda *a: chunks.append(a[1]) or real(*a))
    assert _strip(analyze_file(path)) == plain
    assert len(chunks) > 20 and chunks == sorted(chunks)


@needs_native
def test_cpu_traces_give_the_same_report(monkeypatch, cpu_traces):
    for path in cpu_traces.values():
        assert _strip(analyze_file(str(path))) == _strip(_without_scanner(monkeypatch, lambda: analyze_file(str(path))))


@needs_native
def test_drops_python_frames_but_module_scopes_and_used_categories():
    evs = [
        {"ph": "X", "cat": "python_function", "name": "torch/nn/functional.py(1): softmax", "ts": 1, "dur": 1},
        {"ph": "X", "cat": "python_function", "name": "nn.Module: Attention_0", "ts": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 1, "dur": 1, "args": {"Input Dims": [[1, 2]]}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 3},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 1},
        {"ph": "i", "cat": "cpu_instant_event", "name": "other", "ts": 1},
        {"ph": "M", "name": "process_name", "args": {"name": "python"}},  # no cat: kept, judged after decoding
        [1, 2, 3],  # not an object: kept for the decoder to reject
    ]
    out, dropped = _scan(_chunk([json.dumps(e) for e in evs], ",\n  "))
    kept = json.loads(out)
    assert dropped == 3
    assert [e for e in evs if e in kept] == kept
    assert {e["name"] for e in kept if isinstance(e, dict)} == {"nn.Module: Attention_0", "aten::bmm", "k", "[memory]",
                                                               "process_name"}


@needs_native
@pytest.mark.parametrize("event", [
    '{"cat": "python_\\u0066unction", "name": "f"}',  # escaped category: read only by the decoder
    '{"cat": "python_function", "name": "nn.Module\\u003a X"}',  # escaped name
    '{"cat": "python_function", "cat": "python_function", "name": "f"}',  # a repeated key
    '{"cat": "python_function", "name": 7}',  # a mistyped name: the decoder reports it
    '{"c\\u0061t": "cpu_op", "cat": "python_function", "name": "f"}',  # an escaped key
])
def test_keeps_what_it_cannot_judge_from_the_raw_text(event):
    out, dropped = _scan(event.encode())
    assert dropped == 0 and json.loads(out) == [json.loads(event)]


@needs_native
@pytest.mark.parametrize("text", [
    b'{"cat": "cpu_op", "name": "a"', b'{"cat": "cpu_op", "name": "a}', b'{"cat": "cpu_op"},', b'{"a": [1, 2}',
    b'{"a": 1}{"b": 2}', b'{"a" 1}', b'{"a": 1,}', b"[" * 300 + b"]" * 300, b'{"a": ]}', b',{"a": 1}',
])
def test_gives_up_on_what_is_not_a_plain_run_of_values(text):
    assert _scan(text) == (None, 0)


@needs_native
def test_an_array_cut_short_is_not_plain():
    assert scan(b'[{"cat": "cpu_op"}, {"cat": "kernel"}', 1, 1 << 20, *RULES)[0] is None
    assert scan(b'[{"cat": "cpu_op"},', 1, 1 << 20, *RULES)[0] is None
    assert scan(b'[', 1, 1 << 20, *RULES)[0] is None
    assert scan(b'[ ]', 1, 1 << 20, *RULES) == (b"[]", 0, 2, True)


@needs_native
def test_brackets_and_quotes_inside_strings_and_args_are_not_structure():
    evs = [{"ph": "X", "cat": "cpu_op", "name": 'a },{ "cat": "python_function" ] [ \\" \u00e9\U0001f600',
            "args": {"Input Dims": [[1, [2, {"x": "}"}]]], "Concrete Inputs": ["", "]"]}},
           {"ph": "X", "cat": "python_function", "name": "x { [", "args": {"k": "\\\\"}}]
    out, dropped = _scan(_chunk([json.dumps(e, ensure_ascii=False) for e in evs]))
    assert dropped == 1 and json.loads(out) == evs[:1]


@needs_native
def test_chunks_resume_where_the_last_one_stopped():
    evs = [{"cat": "cpu_op" if i % 3 else "python_function", "name": f"op{i}", "ts": i} for i in range(200)]
    text = ("{\"traceEvents\": [\n" + ",\n".join(json.dumps(e) for e in evs) + "\n], \"x\": 1}").encode()
    pos, kept, dropped, calls = text.index(b"[") + 1, [], 0, 0
    while True:
        out, d, nxt, done = scan(text, pos, 300, *RULES)
        calls += 1
        kept += json.loads(out)
        dropped += d
        if done:
            break
        assert nxt > pos
        pos = nxt
    assert text[nxt:nxt + 1] == b"]" and calls > 10
    assert kept == [e for e in evs if e["cat"] == "cpu_op"] and dropped == 67
    with pytest.raises(ValueError):
        scan(text, len(text) + 1, 10, *RULES)


def _same_kept(fast, plain) -> None:
    """The same events in each list (routed ones decode as events._Routed: compared field by field),
    the same op names and shapes and launch names (ops and launches are columns), and the scanner's
    records the same columns as those read from the decoded events (table.Table)."""
    assert _ops_of(fast) == _ops_of(plain)
    assert _launch_names(fast) == _launch_names(plain)
    assert _gpu_of(fast) == _gpu_of(plain)
    assert [_as_kept(e) for e in fast.flows] == [_as_kept(e) for e in plain.flows]
    for kind in ("op_table", "launch_table", "gpu_table", "memory"):
        a, b = getattr(fast, kind), getattr(plain, kind)
        for f in a.fields:
            assert a[f].tolist() == b[f].tolist(), (kind, f)


def _as_kept(e) -> tuple:
    return events.msgspec.structs.astuple(e)


def _gpu_of(kept) -> tuple:
    """The GPU activities' names and launch configurations (the rest of them is their records)."""
    return ([kept.gpu_names.values[i] for i in kept.gpu_names.ids.tolist()],
            repr([c.tolist() for c in kept.launch_configs()]))


def _launch_names(kept) -> list[str]:
    return [kept.launch_names.values[i] for i in kept.launch_names.ids.tolist()]


def _ops_of(kept) -> tuple:
    """The ops' names in order and the shapes kept (op -> each shape member as written)."""
    return ([kept.op_names.values[i] for i in kept.op_names.ids.tolist()],
            {i: tuple(bytes(getattr(events.op_args(a), f)) for f in ("dims_raw", "types_raw", "concrete_raw",
                                                                     "strides_raw"))
             for i, a in kept.op_shapes.items()})


_cats = st.sampled_from(["python_function", "cpu_op", "kernel", "cuda_runtime", "ac2g", "fwdbwd", "cpu_instant_event",
                         "user_annotation", "gpu_memset", "Trace", ""])
_names = st.one_of(st.sampled_from(["nn.Module: Attn", "nn.Module:", "[memory]", "aten::bmm", "f.py(3): g", ""]),
                   st.text(max_size=12))
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "s", "f", "M"]), "ts": st.integers(0, 10**6), "dur": st.integers(0, 10**3)},
    optional={"cat": _cats, "name": _names, "args": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                                                                   max_size=3)})


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=12), st.sampled_from([",", ", ", ",\n  ", " ,\t"]), st.booleans())
def test_keeps_exactly_what_the_analysis_keeps(evs, sep, ascii_only):
    """Whatever the events and layout, the scanner's output, decoded and filtered by _Kept, is what
    the full chunk gives: it drops nothing the analysis reads and counts every event."""
    text = _chunk([json.dumps(e, ensure_ascii=ascii_only) for e in evs], sep)
    out, dropped = _scan(text)
    assert out is not None
    if not evs:
        return
    fast, plain = events._Kept(None), events._Kept(None)
    fast.add(events._list_decoder.decode(out), dropped)
    plain.add(events._list_decoder.decode(b"[" + text + b"]"))
    _same_kept(fast, plain)
    assert fast.total == plain.total == len(evs)


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 200), st.integers(0, 300))
def test_any_bytes_any_start_no_crash(data, a, budget):
    pos = min(a, len(data))
    out, dropped, nxt, done = scan(data, pos, budget, *RULES)
    if out is None:
        assert (dropped, nxt, done) == (0, 0, False)
    else:
        assert out.startswith(b"[") and out.endswith(b"]") and len(out) <= len(data) - pos + 2
        assert pos <= nxt < len(data) and (not done or data[nxt:nxt + 1] == b"]")


# -- routing: the scanner sorts kept events into their lists, [memory] instants into records ----------
ROUTE = events._ROUTE
_int_or_odd = st.one_of(st.integers(-2**40, 2**40), st.none(), st.sampled_from([0, 2**62, -2**57, 1.0, "7", True]))
_memory_args = st.fixed_dictionaries({}, optional={
    "Device Type": st.sampled_from([0, 1, 6, None]), "Device Id": st.sampled_from([-1, 0, 3, None]),
    "Addr": _int_or_odd, "Bytes": _int_or_odd, "Total Allocated": _int_or_odd, "Total Reserved": _int_or_odd,
    "External id": _int_or_odd, "Input Dims": st.just([[1, 2]]), "Other": st.text(max_size=3)})
_memory_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["i", "I", "X"]), "name": st.sampled_from(["[memory]", "[memory]", "[mem\\u006fry]"])},
    optional={"cat": st.sampled_from(["cpu_instant_event", "Trace", "cpu_op"]),
              "ts": st.one_of(st.floats(-1e18, 1e18), st.integers(0, 10**15), st.just("5")),
              "dur": st.sampled_from([0, 1.5, -1, 1e14]), "pid": st.sampled_from([1, 2, "p"]),
              "tid": st.sampled_from([1, 7, "t"]), "id": st.sampled_from([1, "x", None, 2.5]),
              "args": st.one_of(_memory_args, st.none())})


def _dropped_unread(e: dict) -> bool:
    """Whether the scanner drops the event unread: it has a category no list keeps, and is no
    [memory] instant (a Python frame only as an nn.Module scope)."""
    cat, name = e.get("cat"), e.get("name", "")
    if cat is None:
        return False  # the decoder's default category, "": decoded, then dropped
    if cat == events.PYTHON_CAT:
        return not (isinstance(name, str) and name.startswith(events.MODULE_PREFIX))
    return cat not in events._TARGET and name != events.MEMORY_NAME


def _routed_kept(text: bytes):
    got, dropped, nxt, done = scan(b"[" + text + b"]", 1, 1 << 40, *RULES, False, ROUTE)
    assert got is not None and done
    fast = events._Kept(None)
    fast.add_scanned(got, dropped)
    return got, fast


def _plain_kept(text: bytes):
    plain = events._Kept(None)
    plain.add(events._list_decoder.decode(b"[" + text + b"]"))
    return plain


@needs_native
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_event, _memory_event), max_size=12), st.sampled_from([",", ",\n  "]))
def test_routed_chunks_keep_exactly_what_the_analysis_keeps(evs, sep):
    """With the route, each list and the [memory] records hold what _Kept.add keeps from the decoded
    chunk, in file order, and every event is counted; where the decoder would refuse the chunk, so
    does decoding the routed lists (or the scanner hands the chunk back as plain JSON)."""
    as_json = [json.dumps(e).replace("\\\\u006f", "\\u006f") for e in evs]
    text = _chunk(as_json, sep)
    # The scanner drops an event of a category the analysis never reads before any decoding, so a
    # mistyped member there costs nothing; the Python decoder judges it first (and then skips it with
    # a warning, on its careful path). Compared: the scanner's lists with the decoder's of the rest.
    seen = _chunk([j for j in as_json if not _dropped_unread(json.loads(j))], sep)
    try:
        plain = _plain_kept(seen)
    except events.msgspec.ValidationError:
        with pytest.raises(events.msgspec.ValidationError):
            _routed_kept(text)
        return
    try:
        _same_kept(_plain_kept(text), plain)  # the rule above drops only what the decoder drops too
    except events.msgspec.ValidationError:
        pass
    got, fast = _routed_kept(text)
    _same_kept(fast, plain)
    assert (fast.total, fast.insane) == (len(evs), plain.insane)
    # and the timelines built from the records are those of the decoded events
    from tb_attn_plugin.memory import profiler_events

    assert profiler_events.timelines(fast.memory) == profiler_events.timelines(plain.memory)


@needs_native
@pytest.mark.parametrize("event, routed", [
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "pid": 1, "tid": 2,
      "args": {"Bytes": 64, "Addr": 4096, "Total Allocated": 64, "Device Type": 1, "Device Id": 0}}, True),
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "pid": "1", "tid": 2}, False),  # a string pid
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "args": {"Bytes": 1.0}}, None),  # refused
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "args": {"Bytes": 2**63}}, False),  # > int64
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "args": {"Bytes": 1 - 2**63}}, True),
    ({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": 5.5, "args": None}, True),
    ({"ph": "i", "name": "[memory]", "ts": 1e16, "dur": 0, "args": {"Bytes": -3}}, True),  # no cat: ""
    ({"ph": "i", "cat": "x", "name": "[memory]", "ts": 1e17, "args": {"Bytes": 3}}, True),  # an implausible time
])
def test_memory_instants_become_records_unless_the_decoder_must_judge_them(event, routed):
    text = json.dumps(event).encode()
    if routed is None:  # the decoder refuses the event, and so does decoding the chunk the scanner hands back
        for kept in (_plain_kept, _routed_kept):
            with pytest.raises(events.msgspec.ValidationError):
                kept(text)
        return
    plain = _plain_kept(text)
    for got, fast in (_routed_kept(text), _slim_kept(text, (rules.ARG_KEYS, rules.SHAPE_KEYS, _DROP))):
        # routed, and slimmed too (the args then read as they are met, not skipped and read again)
        assert isinstance(got, tuple) == routed
        _same_kept(fast, plain)
        assert (fast.total, fast.insane) == (plain.total, plain.insane)


@needs_native
def test_an_event_in_doubt_hands_the_whole_chunk_back_as_json():
    evs = [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1},
           {"ph": "X", "cat": "python_\\u0066unction", "name": "f", "ts": 2, "dur": 1}]
    text = _chunk([json.dumps(e).replace("\\\\u0066", "\\u0066") for e in evs])
    got, fast = _routed_kept(text)
    assert isinstance(got, bytes) and json.loads(got) == json.loads(b"[" + text + b"]")
    assert _ops_of(fast) == _ops_of(_plain_kept(text)) and fast.total == 2


@needs_native
def test_memory_records_split_by_device_and_thread():
    from tb_attn_plugin.memory import profiler_events

    evs = [{"ph": "i", "cat": "c", "name": "[memory]", "ts": float(i), "pid": 9, "tid": 1 + i % 2,
            "args": {"Bytes": 100 if i % 3 else -100, "Addr": -1, "Device Type": 1 if i < 4 else 0, "Device Id": 0,
                     "Total Allocated": 10 * i if i != 5 else None, "Total Reserved": 2**60}} for i in range(6)]
    got, fast = _routed_kept(_chunk([json.dumps(e) for e in evs]))
    assert isinstance(got, tuple) and len(got[5]) == 6 * native.REC_SIZE
    tls = profiler_events.timelines(fast.memory)
    # named as device_name names them: "cuda:0", and "cpu" (the CPU has no id)
    assert list(tls) == ["cuda:0", "cpu"] and [tl.threads for tl in tls.values()] == [[("9", "1"), ("9", "2")]] * 2
    cuda, cpu = tls["cuda:0"], tls["cpu"]
    assert list(cuda.t) == [0.0, 1.0, 2.0, 3.0] and list(cuda.delta) == [-100, 100, 100, -100]
    assert list(cuda.addr) == [(1 << 63) - 1] * 4  # Addr -1, masked
    assert list(cuda.thread) == [0, 1, 0, 1] and list(cuda.stream) == [0] * 4
    assert list(cuda.reserved) == [0] * 4  # a reserved count beyond any real memory reads 0
    assert list(cuda.total) == [0, 10, 20, 30] and cpu.total is None  # a null Total Allocated: no totals


@needs_native
def test_memory_columns_of_many_devices_and_threads_are_the_decoded_events_timelines():
    """Devices and threads are looked up in a hash index (a file may name millions): with hundreds
    of each, interleaved and repeated, the timelines equal those of the decoded Events."""
    from tb_attn_plugin.memory import profiler_events

    evs = [{"ph": "i", "cat": "c", "name": "[memory]", "ts": float(i // 3), "pid": i % 7, "tid": (i * 7919) % 1000,
            "args": {"Bytes": 64 if i % 2 else -64, "Addr": i % 97, "Device Type": i % 3, "Device Id": (i * 31) % 300,
                     "Total Allocated": i, "Total Reserved": 2 * i}} for i in range(6000)]
    text = _chunk([json.dumps(e) for e in evs])
    got, fast = _routed_kept(text)
    assert isinstance(got, tuple) and len(got[5]) == 6000 * native.REC_SIZE
    plain = _plain_kept(text)
    want = profiler_events.timelines(plain.memory)
    assert len(want) > 200 and profiler_events.timelines(fast.memory) == want  # "cpu" joins its 100 ids


# -- slimming: kept events keep only the args members Args declares, ops keep_shapes refused no shapes --
# Mostly inside the plain subset a left-out member must keep to (else the chunk goes back as JSON
# and there is nothing slimmed to compare), sometimes outside it: escapes, non-ASCII, exponents.
_ascii = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6)
_odd_value = st.one_of(
    st.integers(-10**30, 10**30), st.integers(-1000, 1000).map(lambda i: i / 8), st.booleans(), st.none(), _ascii,
    st.lists(st.lists(st.integers(0, 600), max_size=3), max_size=3), st.lists(_ascii, max_size=3),
    st.dictionaries(_ascii, st.integers() | _ascii, max_size=2),
    st.sampled_from([1e300, 2.5e-7, "\u00e9", 'a"b', "\n"]))
_slim_args = st.fixed_dictionaries({}, optional={
    "External id": _int_or_odd, "correlation": _int_or_odd, "Sequence number": _int_or_odd, "Ev Idx": _odd_value,
    "Input Dims": _odd_value, "Input type": _odd_value, "Concrete Inputs": _odd_value, "Input Strides": _odd_value,
    "Record function id": _odd_value, "grid": _odd_value, "device": _int_or_odd, "Bytes": _int_or_odd,
    "Total Allocated": _int_or_odd})
_slim_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "i"]), "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "python_function",
                                                                     "fwdbwd", "cpu_instant_event"]),
     "name": st.sampled_from(["aten::bmm", "aten::add", "nn.Module: A", "aten::\\u0061dd", "[memory]"]),
     "ts": st.integers(0, 10**6), "dur": st.integers(0, 10**3)},
    optional={"args": st.one_of(_slim_args, st.none(), st.just(5))})
_DROP = (b"aten::add", b"nn.Module: A")


def _keep_shapes(name: str) -> bool:
    return name.encode() not in _DROP


def _slim_kept(text: bytes, slim: tuple):
    got, dropped, nxt, done = scan(b"[" + text + b"]", 1, 1 << 40, *RULES, False, ROUTE, slim)
    assert got is not None and done
    fast = events._Kept(None, _keep_shapes)
    fast.add_scanned(got, dropped)
    return got, fast


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.lists(_slim_event, max_size=10), st.sampled_from([",", ",\n  "]), st.booleans())
def test_slimmed_chunks_keep_exactly_what_the_analysis_keeps(evs, sep, ascii_only):
    """Slimmed, every kept event decodes to the fields the routed chunk gives once _Kept has dropped
    the shapes keep_shapes refused; where decoding that chunk fails, so does decoding the slimmed one
    (a member left out that is not plainly valid JSON hands the chunk back)."""
    _check_slimmed(_chunk([json.dumps(e, ensure_ascii=ascii_only).replace("\\\\u", "\\u") for e in evs], sep))


def _check_slimmed(text: bytes) -> None:
    try:
        # the plain scan's events kept the Python way (shapes dropped or copied by keep_shapes, op by op)
        out, dropped, _, _ = scan(b"[" + text + b"]", 1, 1 << 40, *RULES)
        plain = events._Kept(None, _keep_shapes)
        plain.add(events._list_decoder.decode(out), dropped)
    except events.msgspec.DecodeError:  # mistyped, or malformed (an args string such as "\u")
        with pytest.raises(events.msgspec.DecodeError):
            _slim_kept(text, (rules.ARG_KEYS, rules.SHAPE_KEYS, _DROP))
        return
    for slim in (None, (rules.ARG_KEYS, rules.SHAPE_KEYS, ()), (rules.ARG_KEYS, rules.SHAPE_KEYS, _DROP)):
        got, fast = _slim_kept(text, slim)
        _same_kept(fast, plain)
        assert (fast.total, fast.insane) == (plain.total, plain.insane)


@needs_native
def test_only_names_seen_with_shapes_are_asked_and_dropped():
    """keep_shapes is asked only about names whose ops hold shapes, so the slim rules' drop list holds
    the refused names of those and nothing else: a long trace names each ProfilerStep#N anew (kineto's
    user_annotation around every step), and that list used to grow by a name per step, handed to the
    scanner and hashed again with every window."""
    asked = []

    def keep_shapes(name: str) -> bool:
        asked.append(name)
        return name == "aten::bmm"

    kept = events._Kept(None, keep_shapes)
    dims = '"args": {"Input Dims": [[2, 3]], "Input type": ["float"]}'
    for step in range(3):
        text = _chunk([f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "ts": {step}, "dur": 1}}',
                       f'{{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": {step}, "dur": 1, {dims}}}',
                       f'{{"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": {step}, "dur": 1, {dims}}}',
                       f'{{"ph": "X", "cat": "cpu_op", "name": "aten::view", "ts": {step}, "dur": 1, "args": {{}}}}'])
        got, dropped, _, _ = scan(b"[" + text + b"]", 1, 1 << 40, *RULES, False, ROUTE, kept.slim())
        kept.add_scanned(got, dropped)
    assert sorted(asked) == ["aten::add", "aten::bmm"]  # once each, and never a step or aten::view
    assert kept.slim()[2] == (b"aten::add",)
    names = kept.op_names.values
    assert sorted(names[i] for i in kept.op_names.ids[sorted(kept.op_shapes)]) == ["aten::bmm"] * 3


# Bytes the scanner must stop at inside a string, and what JSON makes of each: an escaped quote, an
# escaped backslash, a \u escape, UTF-8 (outside the strict subset), DEL, and invalid JSON: an unknown
# escape, a raw tab.
_STOPS = ('\\"', "\\\\", "\\u0061", "\u00e9".encode().decode("latin-1"), "\x7f", "\\q", "\t")


@needs_native
@pytest.mark.parametrize("stop", _STOPS)
def test_long_strings_stop_at_every_offset(stop):
    """The scanner reads strings many bytes at a time: a byte it must judge, at each offset of strings
    up to 40 bytes long (past two 16-byte blocks), in an op's name, a member kept, a member left out
    and an op checked for the strict subset, gives what the plain decode gives."""
    for n in range(41):
        for at in range(n + 1):
            s = "k" * at + stop + "v" * (n - at)
            for e in ('{"ph": "X", "cat": "cpu_op", "name": "aten::bmm%s", "ts": 1, "dur": 1}' % s,
                      '{"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 1, "dur": 1, "args": {"Input type": ["%s"]}}' % s,
                      '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 1, "args": {"Ev Idx": "%s"}}' % s,
                      '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel%s", "ts": 1, "dur": 1}' % s):
                _check_slimmed(e.encode("latin-1"))


@needs_native
def test_slimming_leaves_out_unread_members_and_refused_shapes():
    args = {"External id": 3, "Input Dims": [[1, 2]], "Input Strides": [[2, 1]], "Ev Idx": 7, "Concrete Inputs": ["", "1.5"]}
    evs = [{"ph": "X", "cat": "cpu_op", "name": n, "ts": 1.0, "dur": 1.0, "args": args} for n in ("aten::bmm", "aten::add")]
    got, _ = _slim_kept(_chunk([json.dumps(e) for e in evs]), (rules.ARG_KEYS, rules.SHAPE_KEYS, _DROP))
    assert isinstance(got, tuple)
    # Input Strides is a shape member (why_not_flash reads SDPA's): kept or dropped with them. The op left
    # with no shapes is plain JSON once slimmed: it is only its record and name, its JSON not written
    assert [e["args"] for e in json.loads(got[0])] == [
        {"External id": 3, "Input Dims": [[1, 2]], "Input Strides": [[2, 1]], "Concrete Inputs": ["", "1.5"]}]
    recs = np.frombuffer(got[6], REC)
    assert ((recs["nulls"] & JSON) != 0).tolist() == [True, False] and json.loads(got[10]) == ["aten::bmm", "aten::add"]
    assert recs["external_id"].tolist() == [3, 3]


@needs_native
@pytest.mark.parametrize("member", ['"Ev Idx": 1e3', '"Ev Idx": 01', '"Record function id": [1,,2]', '"Record function id": [1 2]',
                                    '"Ev Idx": "a\\"b"', '"Ev Idx": "\u00e9"', '"Ev Idx": tru', '"Ev Idx": [1,]',
                                    '"Ev Idx": {"a" 1}', '"Ev Idx": ' + "[" * 70 + "]" * 70, '"Ev Idx": -'])
def test_a_member_left_out_must_be_plainly_valid_json(member):
    # Outside the plain subset (valid or not), the chunk goes back as JSON and msgspec judges it.
    text = ('{"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "ts": 1.0, "dur": 1.0, "args": {"External id": 1, '
            + member + '}}').encode()
    got, dropped, nxt, done = scan(b"[" + text + b"]", 1, 1 << 40, *RULES, False, ROUTE,
                                   (rules.ARG_KEYS, rules.SHAPE_KEYS, _DROP))
    assert isinstance(got, bytes) and got == b"[" + text + b"]"


@needs_native
@pytest.mark.parametrize("early", [False, True], ids=["", "begun_early"])
def test_a_streamed_trace_is_slimmed_once_names_are_judged(monkeypatch, tmp_path, early):
    """The first window is slimmed to Args' members, no name dropped yet; the decoding thread then
    tells the scanning thread which names' shapes nobody reads, the later windows leave them out,
    and the events are those of the whole-text path. Begun early (stream.start, before the decoding
    thread exists), the scanning thread asks keep_shapes itself, and the same holds."""
    from tb_attn_plugin.attention.patterns import needs_shapes
    from tb_attn_plugin.trace import stream

    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::gelu" if i % 2 else "aten::bmm", "pid": 1, "tid": 1,
            "ts": float(i), "dur": 0.5, "args": {"External id": i, "Input Dims": [[i, 2]], "Input Strides": [[2, 1]]}}
           for i in range(40000)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    seen = []
    real = native.scan_window
    monkeypatch.setattr(native, "scan_window", lambda *a: seen.append(a[6]) or real(*a))
    monkeypatch.setattr(stream, "READ_BYTES", 64 << 10)  # windows of 64 KB
    monkeypatch.setattr(rules, "CHUNK_BYTES", 64 << 10)
    if early:
        assert stream.start(str(path), needs_shapes)
        queued = stream._begun[str(path)].chunks._q
        deadline = time.monotonic() + 10
        while queued.qsize() < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert queued.qsize() >= 8 and b"aten::gelu" in seen[-1][2]  # slimmed by the scanning thread alone
    ev, _ = stream.decode_file(str(path), needs_shapes)
    assert len(seen) > 10 and seen[0] == (rules.ARG_KEYS, rules.SHAPE_KEYS, ()) and b"aten::gelu" in seen[-1][2] and b"aten::bmm" not in seen[-1][2]
    whole = events.decode(str(path), path.read_bytes(), keep_shapes=needs_shapes)
    assert ev.op_events() == whole.op_events() and 1 not in ev.op_shapes and events.op_args(ev.op_shapes[0]).dims is not None


@needs_native
def test_record_times_are_the_decoders_floats():
    """A Rec's ts is the float msgspec decodes from the same text: kineto's 17-digit times (past the
    exact fast path), integers past 2**53 (halfway: ties to even), negatives, tiny fractions."""
    import random

    import numpy as np

    from tb_attn_plugin.trace.records import REC

    rnd = random.Random(26)
    vals = ["1419118012540.2659", "9007199254740993", "-9007199254740995", "18014398509481987", "0.0001",
            "0.00000000000000000001", "99999999999999999.99", "1.0000000000000000001", "-0.0"]
    vals += [f"{rnd.randint(10**12, 2 * 10**12)}.{rnd.randint(0, 9999):04d}" for _ in range(2000)]
    vals += [str(rnd.choice([1, -1]) * rnd.randint(2**53, 10**17)) for _ in range(2000)]
    vals += [f"{m // 10**f}.{m % 10**f:0{f}d}" for m, f in
             ((rnd.randint(2**53, 10**19 - 1), rnd.randint(1, 19)) for _ in range(2000))]
    vals = [v for v in vals if abs(float(v)) < events.MAX_TS]  # the others are left out as implausible
    text = ",".join('{"ph":"X","cat":"cpu_op","name":"a","ts":%s}' % v for v in vals).encode()
    got, _, _, done = scan(b"[" + text + b"]", 1, 1 << 40, *RULES, False, events._ROUTE)
    assert done and isinstance(got, tuple)
    want = [e.ts for e in events._list_decoder.decode(b"[" + text + b"]")]
    assert want == [float(v) for v in vals]
    assert np.frombuffer(got[6], REC)["ts"].tolist() == want


@needs_native
@pytest.mark.parametrize("member, strict", [('"Ev Idx": 7', True), ('"Ev Idx": 1e3', False),
                                            ('"Ev Idx": "\\u00e9"', False), ('"Ev Idx": [1,,2]', False),
                                            ('"Ev Idx": 01', False)])
def test_an_op_or_launch_outside_the_strict_subset_keeps_its_json_for_msgspec(member, strict):
    # An op or launch the scanner checked whole (strict_value) is only its record and name; any other
    # keeps its JSON, which msgspec then checks: broken JSON in a member the scanner skips is refused
    # by the routed decode as by the plain one.
    evs = [f'{{"ph": "X", "cat": "{cat}", "name": "n", "ts": 1.0, "dur": 1.0, "args": {{"External id": 1, {member}}}}}'
           for cat in ("cpu_op", "cuda_runtime")]
    text = b"[" + ",".join(evs).encode() + b"]"
    got, _, _, done = scan(text, 1, 1 << 40, *RULES, False, ROUTE)
    assert isinstance(got, tuple) and done
    for j, recs in ((0, got[6]), (2, got[8])):
        flagged = (np.frombuffer(recs, REC)["nulls"] & JSON) != 0
        assert flagged.tolist() == [not strict] and (got[j] == b"[]") == strict
    kept = events._Kept(None)
    try:
        events._list_decoder.decode(text)  # the decoder's own verdict on the whole chunk
    except events.msgspec.DecodeError:
        with pytest.raises(events.msgspec.DecodeError):
            kept.add_scanned(got, 0)
    else:
        kept.add_scanned(got, 0)
        assert _launch_names(kept) == ["n"] and kept.op_names.values == ["n"]


_PLAIN_OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 1.5, "dur": 2,
             "args": {"External id": 1, "Ev Idx": 3}}


@needs_native
@pytest.mark.parametrize("change, strict", [
    ({}, True),  # all the walk read and checked itself: known plain without a second look
    ({"s": "t"}, True),  # a member the walk skipped: strict_value looks again, and finds it plain
    ({"args": {"External id": 1, "block": [1, 1, 1]}}, True),  # an args member kept that is not an int: the same
    ({"s": 1e300}, False),  # ... and here finds an exponent
    ({"args": {"External id": 1, "block": 1e300}}, False),
    ({"ts": "%e"}, False),  # an exponent in a time event_record read: strict_value says no
    ({"dur": "%s"}, False),  # a number longer than the subset's 32 characters
    ({"name": "aten::mm\u00e9"}, False),  # UTF-8: outside the printable ASCII the walk vouches for
    ({"name": "aten::mm\x7f"}, False),
    ({"name": "%t"}, True),  # a tab between tokens: not vouched for, but plain for strict_value
])
def test_the_walk_vouches_only_for_what_it_checked(change, strict):
    """An op or launch whose slimmed text the scanner's walk has checked in full (printable ASCII, only
    members event_record and slim_args read as ints and times, no exponent) is only its record and
    name; anything else is checked again by strict_value, and keeps its JSON for msgspec when outside
    the strict subset. Either way the routed events are the plain decode's."""
    evs = []
    for cat in ("cpu_op", "cuda_runtime"):
        e = {**_PLAIN_OP, "cat": cat, **change}
        text = json.dumps(e, ensure_ascii=False, separators=(",", ":"))
        text = text.replace('"%s"', "0." + "0" * 38 + "5").replace('"%e"', "1.5e3").replace('"name":"%t"', '"name":\t"aten::mm"')
        evs.append(text)
    raw = ",".join(evs).encode()
    got, _ = _slim_kept(raw, (rules.ARG_KEYS, rules.SHAPE_KEYS, ()))
    assert isinstance(got, tuple)
    for j, recs in ((0, got[6]), (2, got[8])):
        assert ((np.frombuffer(recs, REC)["nulls"] & JSON) != 0).tolist() == [not strict]
        assert (got[j] == b"[]") == strict
    _check_slimmed(raw)
