"""The report's format has one source (tb_attn_plugin/format/report/): the generated files match it, and
every report the engine writes converts into its Structs with nothing left over."""

from __future__ import annotations

import json
import pickle

import msgspec
import pytest

from tb_attn_plugin.format import generate
from tb_attn_plugin.format.report import Report, SnapshotReport
from tb_attn_plugin.memory import engine
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import REPO, SHARED_TRACES, recorded_trace
from tests.memory_snapshots import known_snapshot

HINT = f"run `{generate.COMMAND}` and commit the result"


def test_generated_files_are_up_to_date(tmp_path):
    generate.main(["--out", str(tmp_path)])
    stale = [rel for rel in generate.generated()
             if not (REPO / rel).exists() or (REPO / rel).read_bytes() != (tmp_path / rel).read_bytes()]
    if stale:  # one line, not a diff of thousands
        pytest.fail(f"{', '.join(stale)} out of date with tb_attn_plugin/format/report/: {HINT}", pytrace=False)


def test_generated_files_say_so():
    for rel, text in generate.generated().items():
        assert generate.NOTICE in text.splitlines()[1 if rel.endswith(".json") else 0], rel


def _converts(report: dict, into=Report) -> None:
    """``report`` is exactly an ``into``: strict types, no key the Structs lack, and nothing lost on the
    way back (an optional field the engine writes comes out again)."""
    as_json = msgspec.json.encode(report)  # the bytes the plugin serves and --json prints
    typed = msgspec.json.decode(as_json, type=into, strict=True)
    assert msgspec.to_builtins(typed) == json.loads(as_json)
    msgspec.convert(report, into, strict=True)


def test_each_report_key_is_written_by_one_row_of_the_sections_table(recorded_traces):
    """A new section is one row of report/sections.py: the rows' keys are the Report's fields, each
    written once, in the order a real report holds them (analysis_seconds, the clock, last)."""
    from tb_attn_plugin.report.sections import SECTIONS

    written = [k for s in SECTIONS for k in (s.keys or (s.name,))]
    assert len(written) == len(set(written))
    assert set(written) | {"analysis_seconds"} == set(Report.__struct_fields__)
    report = analyze_file(str(recorded_traces / "sdpa.json.gz"))
    assert list(report) == written + ["analysis_seconds"]
    texts = [s.text() for s in SECTIONS if s.lines]
    assert texts and all(callable(t) for t in texts)
    for t in texts:  # each section's text reads a real report
        got = t(report)
        assert isinstance(got, list) and all(isinstance(line, str) for line in got)


def test_layers_encode_alike_through_their_struct(recorded_traces):
    """A Layer's fields are in the order the engine writes its row: the layers section can return Layer
    Structs and keep the report's bytes (issue 44 step 3)."""
    from tb_attn_plugin.format.report.layers import Layer

    paths = sorted(recorded_traces.glob("*.json.gz")) + (sorted(SHARED_TRACES.glob("*.json.gz"))
                                                          if SHARED_TRACES.is_dir() else [])
    rows = [lay for p in paths for lay in analyze_file(str(p))["layers"]]
    assert rows
    for lay in rows:
        assert msgspec.json.encode(msgspec.convert(lay, Layer, strict=True)) == msgspec.json.encode(lay), lay["layer"]


def test_recorded_reports_are_reports(recorded_traces):
    paths = sorted(recorded_traces.glob("*.json.gz"))
    assert paths
    for p in paths:
        _converts(analyze_file(str(p)))


def test_shared_gpu_reports_are_reports():
    paths = sorted(SHARED_TRACES.glob("*.json.gz")) if SHARED_TRACES.is_dir() else []
    if not paths:
        pytest.skip(f"no shared GPU traces in {SHARED_TRACES} (set TB_ATTN_SHARED_TRACES)")
    for p in paths:
        _converts(analyze_file(str(p)))


def test_cut_window_report_is_a_report(tmp_path):
    """gpu_window, gpu_recorded, unrecorded_launches and gpu_unrecorded_calls: keys only a cut trace has."""
    from tests.kernel_traces import TraceBuilder
    from tests.test_gpu_window import FLASH, _sdpa_call

    b = TraceBuilder()
    _sdpa_call(b, [FLASH], True)
    _sdpa_call(b, [FLASH], False)  # launched, then the profiler stopped
    r = analyze_file(str(b.write(tmp_path / "cut.json")))
    assert r["gpu_window"] is not None and any(lay.gpu_unrecorded_calls for lay in r["layers"])
    _converts(r)


def test_snapshot_reports_are_snapshot_reports(tmp_path):
    snap, _ = known_snapshot()
    p = tmp_path / "s.pickle"
    p.write_bytes(pickle.dumps(snap))
    r = engine.snapshot_report(str(p))
    _converts(r, SnapshotReport)
    # A snapshot beside a trace joins its report: the trace's memory section, or the snapshot's own.
    trace = tmp_path / "w.1.pt.trace.json.gz"
    trace.write_bytes(recorded_trace("sdpa").read_bytes())
    (tmp_path / "w.1.pickle").write_bytes(pickle.dumps(snap))
    joined = analyze_file(str(trace))
    mem = joined["memory"]
    assert mem is not None and (mem["source"] == "snapshot" or "snapshot_section" in mem)
    _converts(joined)


def test_a_key_the_structs_lack_fails(recorded_traces):
    # the report as JSON builtins (what --json prints): its first layer row is there on a CPU trace too
    r = msgspec.to_builtins(analyze_file(str(recorded_traces / "sdpa.json.gz")))
    r["layers"][0]["new_section"] = {"bytes": 1}
    with pytest.raises(msgspec.ValidationError, match="new_section"):
        msgspec.convert(r, Report, strict=True)
    del r["layers"][0]["new_section"]
    r["layers"][0]["gpu_us"] = "fast"
    with pytest.raises(msgspec.ValidationError, match="gpu_us"):
        msgspec.convert(r, Report, strict=True)


def test_docs_name_only_parts_the_schemas_define():
    """docs/api.md names the format's parts (`Layer`, `CompareDoc`) instead of copying their fields: each
    such name is a definition of report/schema.json or plugin/routes.schema.json, so a renamed or
    deleted Struct cannot leave the docs pointing at nothing."""
    import re

    defined = {"Report"}
    for rel in (generate.SCHEMA_PATH, generate.ROUTE_SCHEMA_PATH):
        defined |= set(json.loads((REPO / rel).read_text(encoding="utf-8"))["$defs"])
    outside = {"LlamaAttention", "ProfilerStep", "Addr", "Bytes"}  # torch's, Hugging Face's and kineto's names
    named = set(re.findall(r"`([A-Z][a-z][A-Za-z0-9]*)`", (REPO / "docs" / "api.md").read_text(encoding="utf-8")))
    assert named - defined - outside == set()
    assert {"Layer", "CompareDoc", "RunsDoc", "MemoryPeak"} <= named  # the docs do name them
