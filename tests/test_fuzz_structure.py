"""Structural fuzzing of the reader and the whole analysis over real traces.

tests/test_bad_input.py flips bytes of one small trace, which mostly finds JSON syntax errors. Here
the JSON stays valid and the *trace* goes wrong the way real files do: events dropped, duplicated or
reordered (a merge of two ranks, a truncating exporter), fields of the wrong type (a string ``ts``,
a float correlation id, a list where ``args`` should be), numbers far outside any real range, unicode
in names, and documents with their top level bent. Over three real GPU traces.

The property: ``analyze_file`` either raises one TraceError naming the file, or returns a report
that validates against the schema, holds only finite numbers (it is sent as JSON), and is internally
consistent (shares within [0, 1], the attention time within the total, calls never negative).
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math
from importlib import resources

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tb_attn_plugin.format.errors import TraceError
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import recorded_trace

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text())

# Small enough that one analysis takes well under a second on a loaded 2-core machine.
TRACES = ["small", "sdpa", "math"]  # recorded by the suite (tests/recorded.py)


@functools.lru_cache(maxsize=None)
def _doc(name: str) -> bytes:
    return gzip.decompress(recorded_trace(name).read_bytes())


FIELDS = ["ts", "dur", "name", "cat", "ph", "pid", "tid", "args", "id"]
ARG_FIELDS = ["correlation", "External id", "Input Dims", "Input type", "device", "stream", "Sequence number",
              "Fwd thread id", "kernel", "grid", "block"]
WEIRD_VALUES = [
    None, "", "yesterday", "\u202e\u0000 nul", "\U0001f9e8 attention", "nn.Module: \u00e9\u00e8 ",
    -1, 0, 2**63 - 1, 2**64 + 7, -(2**63), 1e300, -1e300, 1.5e-300, 5e-324, 3.7, [], [1, "x"], {}, {"a": {"b": [None]}},
    True, False, "nan", "inf", "-1e999",
]
WEIRD = st.sampled_from(WEIRD_VALUES)
MUTATION_KINDS = ["drop", "dup", "reorder", "field", "arg", "drop_field", "huge", "unicode", "shift", "foreign"]


def _values(events):
    return [e for e in events if isinstance(e, dict)]


# One mutation: (kind, position as a fraction of the event list, a size, a value). Drawn as plain data so
# that a failing example prints in a few lines; applied to a fresh copy of the trace by mutate().
MUTATION = st.tuples(
    st.sampled_from(MUTATION_KINDS),
    st.floats(0, 1, exclude_max=True), st.integers(1, 200), st.integers(0, 10**6), WEIRD, st.text(max_size=40))
CASES = st.tuples(st.sampled_from(TRACES), st.lists(MUTATION, min_size=1, max_size=8),
                  st.sampled_from(["keep", "keep", "keep", "array", "extra", "device_props"]), st.booleans())
FOREIGN = [None, 7, "event", [], {"ph": "X"}, {"ph": "M", "name": 3}, {"ph": "f", "id": "x", "bp": "e"}, {"cat": "kernel"}]
# Large but finite: the sums of a whole trace stay finite. Values that overflow a sum are in
# test_overflowing_durations_stay_out_of_the_report below.
HUGE = [1e300, 2**62, -5, 0, 5e-324]  # 5e-324: a subnormal time (its rate overflows; was ZeroDivisionError)
CATS = ["kernel", "cpu_op", "cuda_runtime", "python_function"]


def mutate(name, mutations, top):
    return apply_mutations(json.loads(_doc(name)), mutations, top)


def apply_mutations(doc, mutations, top):
    """``mutations`` applied to ``doc`` (a trace, changed in place); the document to write (``top`` bends its top level)."""
    events = doc["traceEvents"]
    for kind, where, size, k, weird, text in mutations:
        if not events:
            break
        i = int(where * len(events))
        e = events[i]
        if kind == "drop":
            del events[i:i + size // 4 + 1]
        elif kind == "dup":
            events[i:i] = copy.deepcopy(events[i:i + size // 4 + 1])
        elif kind == "reorder":
            seg = events[i:i + size]
            events[i:i + len(seg)] = [seg[(j * (k | 1)) % len(seg)] for j in range(len(seg))] if len(seg) % 2 else seg[::-1]
        elif kind == "field" and isinstance(e, dict):
            e[FIELDS[k % len(FIELDS)]] = weird
        elif kind == "arg" and isinstance(e, dict):
            if isinstance(e.get("args"), dict):
                e["args"][ARG_FIELDS[k % len(ARG_FIELDS)]] = weird
            else:
                e["args"] = weird
        elif kind == "drop_field" and isinstance(e, dict) and e:
            e.pop(sorted(e)[k % len(e)], None)
        elif kind == "huge":  # every event of one category gets an absurd ts or dur
            key, val, cat = ("ts", "dur")[k % 2], HUGE[(k // 2) % len(HUGE)], CATS[(k // 8) % len(CATS)]
            for x in _values(events):
                if x.get("cat") == cat:
                    x[key] = val
        elif kind == "unicode" and isinstance(e, dict):
            e["name"] = text
        elif kind == "shift" and isinstance(e, dict) and isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + (-1e9, -1, 0.5, 1e9)[k % 4]
        elif kind == "foreign":
            events.insert(i, copy.deepcopy(FOREIGN[k % len(FOREIGN)]))
    if top == "array":
        return events
    if top == "extra":
        doc["\U0001f600"] = {"nested": [1e300, None, "\u0000"]}
    elif top == "device_props":
        doc["deviceProperties"] = [1, {"name": 5}] if len(mutations) % 2 else "gpu"
    return doc


def _finite(x, where="report"):
    if isinstance(x, float):
        assert math.isfinite(x), f"non-finite number at {where}: {x}"
    elif isinstance(x, dict):
        for k, v in x.items():
            _finite(v, f"{where}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _finite(v, f"{where}[{i}]")


def check_report(r: dict) -> None:
    r = msgspec.to_builtins(r)  # an in-process report's sections as the JSON it is written as (its layers are Structs)
    _finite(r)
    jsonschema.validate(r, SCHEMA)
    assert msgspec.json.decode(msgspec.json.encode(r)) == r  # what the plugin sends is what was built
    assert r["calls"] >= 0 and 0.0 <= r["attention_share"] <= 1.0
    basis = "gpu" if r["time_basis"] == "gpu" else "cpu"
    assert r[f"attention_{basis}_us"] <= r[f"total_{basis}_us"] * (1 + 1e-9) + 1e-3


def analyze_or_error(path: str):
    try:
        return analyze_file(path)
    except TraceError as exc:
        assert str(exc).startswith(path + ": ") and "\n" not in str(exc)
        return None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=CASES)
def test_structurally_mutated_real_traces(tmp_path, case):
    name, mutations, top, gz = case
    body = mutate(name, mutations, top)
    raw = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8", "surrogatepass")
    path = str(tmp_path / ("t.pt.trace.json.gz" if gz else "t.pt.trace.json"))
    with open(path, "wb") as fh:
        fh.write(gzip.compress(raw, compresslevel=1) if gz else raw)
    r = analyze_or_error(path)
    if r is not None:
        check_report(r)


@pytest.mark.parametrize("name", TRACES)
def test_unmutated_traces_pass_the_same_checks(name, tmp_path):
    """The checks above hold on the originals, so a failure above is the mutation's doing."""
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(_doc(name))
    r = analyze_file(str(path))
    check_report(r)
    assert r["calls"] > 0


@pytest.mark.parametrize("raw,expect", [
    # Lone surrogates escaped in JSON are valid JSON text but not valid unicode.
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "\\ud800 attn", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}', None),
    # Invalid UTF-8 bytes inside a name.
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "\xff\xfe", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}', None),
    # Numbers beyond float range, and integers beyond 64 bits.
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e999, "dur": 1, "pid": 0, "tid": 7}]}', None),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 7,'
     b' "args": {"correlation": 123456789012345678901234567890}}]}', None),
    # Nesting deep, but within what JSON decoders accept.
    (b'{"traceEvents": [{"ph": "X", "args": {"x": ' + b"[" * 500 + b"]" * 500 + b'}}], "y": ' + b"{\"a\":" * 500 + b"1" + b"}" * 500 + b"}", None),
    # A BOM in front, as some Windows tools write.
    (b'\xef\xbb\xbf{"traceEvents": []}', None),
])
def test_hand_picked_inputs(tmp_path, raw, expect):
    path = str(tmp_path / "t.pt.trace.json")
    with open(path, "wb") as fh:
        fh.write(raw)
    r = analyze_or_error(path)
    if r is not None:
        check_report(r)


def test_overflowing_durations_stay_out_of_the_report(tmp_path):
    doc = json.loads(_doc("small"))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    for e in ops:
        e["dur"] = 1e308  # each finite; together they sum to inf
    path = str(tmp_path / "t.pt.trace.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    r = analyze_file(path)  # the other events still make a report
    check_report(r)
    assert any(f"skipped {len(ops)} events" in w for w in r["warnings"]), r["warnings"]
    assert r["trace"]["ops"] == 0 and r["calls"] == 0


@pytest.mark.parametrize("where", ["top", "event"])
def test_deeply_nested_json_is_one_clear_error(tmp_path, where):
    deep = b"[" * 10000 + b"]" * 10000
    raw = (b'{"traceEvents": [], "x": ' + deep + b"}" if where == "top"
           else b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "args": ' + deep + b"}]}")
    path = str(tmp_path / "t.pt.trace.json")
    with open(path, "wb") as fh:
        fh.write(raw)
    with pytest.raises(TraceError, match="nested too deeply") as exc:  # not a RecursionError
        analyze_file(path)
    assert str(exc.value).startswith(path + ": ") and "\n" not in str(exc.value)
