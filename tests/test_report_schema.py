"""Every report the engine writes validates against the schema checked into the repo."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import msgspec
import pytest

from tb_attn_plugin.report.build import analyze_file
from tests.conftest import recorded_trace, shared_trace

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads(resources.files("tb_attn_plugin.report").joinpath("schema.json").read_text())


@pytest.mark.parametrize("name", ["tl_h100_bert_small_sdpa_flash", "tl_mi300x_torch_compile_small",
                                  "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph", "hta_a100_negative_log_softmax_fwdbwd"])
def test_reports_validate(name):
    jsonschema.validate(msgspec.to_builtins(analyze_file(str(shared_trace(name)))), SCHEMA)


def test_cpu_reports_validate(cpu_traces, recorded_traces):
    for path in list(cpu_traces.values()) + sorted(recorded_traces.glob("*.json.gz")):
        jsonschema.validate(msgspec.to_builtins(analyze_file(str(path))), SCHEMA)


def test_schema_rejects_a_broken_report():
    r = msgspec.to_builtins(analyze_file(str(recorded_trace("small"))))
    jsonschema.validate(r, SCHEMA)
    r["stages"][0]["stage"] = "not-a-stage"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(r, SCHEMA)


def test_cli_json_is_the_report_in_one_shape_for_a_file_and_a_directory(tmp_path):
    path = str(recorded_trace("sdpa"))
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", path, "--json", "-q"],
                          capture_output=True, text=True, timeout=120, check=True)
    doc = json.loads(proc.stdout)
    assert list(doc) == ["reports"]
    (report,) = doc["reports"]
    jsonschema.validate(report, SCHEMA)
    assert report["calls"] == 2 and report["source"]["path"] == path
    run = tmp_path / "run"
    run.mkdir()
    (run / "w.1.pt.trace.json.gz").write_bytes(recorded_trace("sdpa").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "report", str(run), "--json", "-q"],
                          capture_output=True, text=True, timeout=120, check=True)
    from_dir = json.loads(proc.stdout)
    assert list(from_dir) == ["reports"] and from_dir["reports"][0]["calls"] == report["calls"]
