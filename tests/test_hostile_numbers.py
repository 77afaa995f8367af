"""Numbers a hostile trace can carry into the analysis: subnormal durations, shape integers past any
tensor, NaN/inf written as text, 5,000-digit step numbers, and trees deep and wide at once.

Each case is a real recorded CPU trace (tests/recorded.py) with one thing bent; the property is the
fuzzers' (tests/test_fuzz_structure.py: check_report): a report with only finite numbers that
validates, or one TraceError naming the file.
"""

from __future__ import annotations

import gzip
import json
import math

import msgspec
import pytest

from tb_attn_plugin.attention import shapes
from tb_attn_plugin.format import tags
from tb_attn_plugin.text import units
from tb_attn_plugin.report import finite
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import recorded_trace
from tests.test_fuzz_structure import check_report


def _doc(role: str = "sdpa") -> dict:
    return json.loads(gzip.decompress(recorded_trace(role).read_bytes()))


def _write(tmp_path, doc) -> str:
    path = str(tmp_path / "t.pt.trace.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    return path


def _sdpa_ops(doc):
    return [e for e in doc["traceEvents"] if e.get("name") == "aten::scaled_dot_product_attention"]


@pytest.mark.parametrize("role", ["sdpa", "small"])
def test_subnormal_op_durations_give_a_finite_report_not_a_zero_division(tmp_path, role):
    """Every CPU op 5e-324 µs long: core time > 0, but core x 1e-6 underflows to 0 (was ZeroDivisionError)."""
    doc = _doc(role)
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["dur"] = 5e-324
    r = analyze_file(_write(tmp_path, doc))
    check_report(r)
    assert r["calls"] > 0
    assert all(lay.tflops is None for lay in r["layers"])  # no rate from no time: unknown, not inf or 0


def test_rates_are_none_when_they_would_not_be_finite():
    assert units.per_second(1e12, 5e-324, 1e12) is None
    assert units.per_second(1e12, 0.0) is None and units.per_second(None, 1.0) is None
    assert units.per_second(float("nan"), 1.0) is None
    assert units.per_second(2e12, 1e6, 1e12) == 2.0  # 2e12 FLOP in one second: 2 TFLOP/s


def test_flops_of_shapes_past_any_tensor_are_unknown_not_an_overflow():
    huge = {"batch_heads": 10**400, "q_len": 1, "k_len": 1, "head_dim": 1}
    assert shapes.flops(huge, False) is None  # was OverflowError (int too large to convert to float)
    assert shapes.score_bytes(huge, "float32") is None
    assert shapes.flops({"batch_heads": True, "q_len": 1, "k_len": 1, "head_dim": 1}, False) is None
    assert shapes.flops({"batch_heads": 16, "q_len": 128, "k_len": 128, "head_dim": 64}, False) == 4.0 * 16 * 128 * 128 * 64


def test_a_call_tag_with_a_300_digit_length_gives_a_finite_report(tmp_path):
    """A record_function tag (format/tags.py) is text anyone can write: lq of 300 digits parsed to an
    int that flops() could not turn into a float (OverflowError out of _assemble)."""
    doc = _doc("sdpa")
    op = _sdpa_ops(doc)[0]
    name = tags.call_name(layer="blocks.0.attn", b=1, hq=2, lq=int("9" * 300), lk=8, d=16, dropout="nan")
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": name, "pid": op["pid"], "tid": op["tid"],
                               "ts": op["ts"] - 0.5, "dur": op["dur"] + 1.0})
    r = analyze_file(_write(tmp_path, doc))
    check_report(r)
    assert any(lay.layer == "blocks.0.attn" for lay in r["layers"])
    assert tags.parse_call(name).get("lq") is None and "dropout" not in tags.parse_call(name)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e999", "7"])
def test_dropout_written_as_nan_or_inf_is_unknown(tmp_path, text):
    """The SDPA op's dropout_p comes from ``Concrete Inputs`` as text; float('nan') made
    ``layers[i].dropout`` NaN, which strict JSON clients reject."""
    doc = _doc("sdpa")
    for e in _sdpa_ops(doc):
        e["args"]["Concrete Inputs"][4] = text
    r = analyze_file(_write(tmp_path, doc))
    check_report(r)
    assert r["layers"] and all(lay.dropout is None for lay in r["layers"])


def test_a_5000_digit_step_number_is_no_step(tmp_path):
    doc = _doc("sdpa")
    op = _sdpa_ops(doc)[0]
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    last = max(e["ts"] + e["dur"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#" + "7" * 5000,
                               "pid": op["pid"], "tid": op["tid"], "ts": first - 1, "dur": last - first + 2})
    r = analyze_file(_write(tmp_path, doc))
    check_report(r)
    assert all(s["step"] < 10**12 for s in r["steps"])
    json.dumps(msgspec.to_builtins(r))  # Python's int-string limit: a 4,300+ digit int cannot be written


def test_the_final_guard_turns_non_finite_numbers_into_unknown_with_a_warning():
    r = {"warnings": [], "layers": [{"dropout": float("nan"), "tflops": 1.5}], "x": {"y": [float("inf"), 2.0]}}
    assert finite.scrub(r) == ["layers[0].dropout", "x.y[0]"]
    assert r["layers"][0] == {"dropout": None, "tflops": 1.5} and r["x"]["y"] == [None, 2.0]
    assert "2 numbers were not finite" in r["warnings"][0] and "layers[0].dropout" in r["warnings"][0]
    assert all(not (isinstance(v, float) and not math.isfinite(v)) for v in r["x"]["y"])


def test_the_final_guard_finds_every_non_finite_float_it_did_before_the_byte_search():
    """scrub walks only reports whose msgpack bytes may hold a NaN or infinity (finite.py): every
    non-finite bit pattern is found, in any place, and values msgpack cannot encode still get the walk."""
    import struct

    import numpy as np

    patterns = ["7ff0000000000000", "fff0000000000000", "7ff8000000000000", "fff8000000000001", "7fffffffffffffff",
                "7ff0000000000001"]
    for hx in patterns:
        v = struct.unpack(">d", bytes.fromhex(hx))[0]
        r = {"a": [1, {"b": v}], "c": "\xcb\x7f\xf0"}
        assert finite.scrub(r) == ["a[1].b"] and r["a"][1]["b"] is None
    r = {"n": [np.float64("inf")], "s": {1, 2}}  # not msgpack's: walked
    assert finite.scrub(r) == ["n[0]"]
    clean = {"x": [0.0, -0.0, 5e-324, 1.7976931348623157e308, -1e308, 2**63, -(2**63)], "k": {1.0: "key"}}
    assert finite.scrub(clean) == [] and "warnings" not in clean


def test_deep_nesting_with_wide_fan_out_keeps_each_call_in_its_module(tmp_path):
    """2,000 nested ops, each with 20 children: the enclosing-module and compiled-region lookups are
    one pass over the tree (attention/detect.py: _ancestry), not a walk up from every call (which
    made such a tree quadratic: past 30 s in the fuzzers). Same answers as the walk."""
    depth, fan = 2000, 20
    end = 10.0**7
    events = []
    for d in range(depth):
        name = f"nn.Module: Block_{d}" if d % 2 else "aten::linear"
        events.append({"ph": "X", "cat": "python_function" if d % 2 else "cpu_op", "name": name, "ts": d * 1.0,
                       "dur": end - 2.0 * d, "pid": 1, "tid": 1})
        for w in range(fan):
            events.append({"ph": "X", "cat": "cpu_op", "name": ["aten::bmm", "aten::softmax", "aten::bmm", "aten::mul"][w % 4],
                           "ts": end - 2.0 * d - 1.0 - (w + 1) * 1e-3, "dur": 1e-4, "pid": 1, "tid": 1})
    r = analyze_file(_write(tmp_path, {"traceEvents": events}))
    check_report(r)
    assert r["calls"] > 0


def test_annotate_with_a_4000_digit_tag_length_writes_its_copy(tmp_path):
    """A tag's lq of 4,000 digits parsed (under Python's 4,300-digit limit), and the unfused call's
    score-matrix bytes (B·H·Lq·Lk·itemsize, ~8,000 digits) then failed json.dumps in annotate with the
    integer-string limit. Such a length is no tensor's: unknown, and the copy is written."""
    from tb_attn_plugin.report.annotate import annotate

    doc = _doc("eager")
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    last = max(e["ts"] + e["dur"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    name = tags.call_name(layer="blocks.0.attn", impl="eager", b=2, hq=4, lq=int("7" * 4000), lk=int("7" * 4000), d=16)
    doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": name, "pid": op["pid"], "tid": op["tid"],
                               "ts": first - 1, "dur": last - first + 2})
    out = tmp_path / "out.json"
    got = annotate(_write(tmp_path, doc), str(out))
    assert got["calls"] > 0
    added = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "tb_attn.call"]
    assert added and all("score_matrix_bytes" not in e["args"] or e["args"]["score_matrix_bytes"] < 2**64 for e in added)


def _chain_inside_sdpa(tmp_path, depth: int) -> str:
    """The recorded SDPA trace with a chain of ``depth`` nested ops (five names), each holding two short
    ones, inside its first attention op: the value fuzzer's "nest" shape (seed 20,000,075's case)."""
    doc = _doc("sdpa")
    e = _sdpa_ops(doc)[0]
    names = ["aten::bmm", "aten::softmax", "nn.Module: SelfAttention_0", "aten::linear", "aten::matmul"]
    step = float(e["dur"]) / (8 * depth)  # the chain's ends close in by one step a level, all inside e
    t0, span = e["ts"] + step, float(e["dur"]) - 2 * step
    for d in range(depth):
        doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": names[d * 7 % 5], "ts": t0 + d * step,
                                   "dur": span - 2 * d * step, "pid": e["pid"], "tid": e["tid"]})
        for w in range(2):
            doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": ["aten::bmm", "aten::mul"][w],
                                       "ts": t0 + span - (d + 1) * step + w * step / 3, "dur": step / 4,
                                       "pid": e["pid"], "tid": e["tid"]})
    (tmp_path / str(depth)).mkdir()
    return _write(tmp_path / str(depth), doc)


def test_a_deep_chain_of_few_names_is_read_in_time_linear_in_its_depth(tmp_path):
    """Every item of a call asked its enclosing ops' names, walking up the chain (reading/expected.py),
    and each cause row searched them all: 3,000 nested ops took 5-20 s of CPU (1.1 MB of JSON), four
    times the depth sixteen times the time. Paths are now built from the parent's, each name once."""
    import time

    cpu = {}
    for depth in (750, 3000):
        path = _chain_inside_sdpa(tmp_path, depth)
        t = time.process_time()
        r = analyze_file(path)
        cpu[depth] = time.process_time() - t
        check_report(r)
        assert r["calls"] > 0
    assert cpu[3000] < 8 * cpu[750] + 0.5, cpu  # quadratic: about 16 times


def test_a_launch_correlation_past_int64_is_no_traceback(tmp_path):
    """Found by the long fuzz run (value seed 40,023,247): a launch whose correlation id is past int64 made
    trace/window.py's before_window raise OverflowError (a traceback, exit 1). Such an id matches no GPU
    activity's; the report reads the rest of the trace as before."""
    from tests.kernel_traces import TraceBuilder

    b = TraceBuilder()
    b.eager_calls([[("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>(Flash_fwd_params)", 40.0)]
                   for _ in range(3)], op_name="aten::_flash_attention_forward", module="nn.Module: BertSelfAttention_")
    plain = analyze_file(str(b.write(tmp_path / "plain.json")))
    b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": b.events[0]["pid"],
                     "tid": b.events[0]["tid"], "ts": b.t, "dur": 2.0, "args": {"correlation": 2**64 + 5}})
    bent = analyze_file(str(b.write(tmp_path / "bent.json")))
    assert bent["calls"] == plain["calls"] == 3
    assert bent["attention_gpu_us"] == plain["attention_gpu_us"]
