"""Host vs GPU on a trace with no GPU (issue 47, item 4): the reading says the ops compute on the CPU,
calls their own time the work (not "dispatch"), and shows no launch, sync or GPU figure (zeros there
read as measurements). On GPU traces the reading is unchanged. Over the suite's recorded CPU traces
(tests/recorded.py) and a shared H100 trace."""

from __future__ import annotations

import re

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.text import reading_lines
from tests.conftest import recorded_trace, shared_trace


def _host_lines(r) -> list[str]:
    return [line for line in reading_lines(r) if line.lstrip().startswith(("host:", "host time:"))]


@pytest.mark.parametrize("role", ["sdpa", "eager", "math"])
def test_a_cpu_trace_says_cpu_only_and_shows_no_gpu_zeros(role):
    r = analyze_file(str(recorded_trace(role)))
    rows = [row for row in r["reading"] if row.get("host")]
    assert rows, r["reading"]
    for row in rows:
        h = row["host"]
        assert h["cpu_only"] is True and h["gpu_us_per_call"] is None and h["host_bound"] is None
        assert "on the CPU" in h["summary"] and "not dispatch" in h["summary"]
    lines = _host_lines(r)
    # no op time called dispatch ("14.1 µs dispatch" before), no launch or sync figures, no GPU column
    assert lines and not any(re.search(r"s dispatch|launches|syncs|on the GPU", line) for line in lines), lines
    assert any("own CPU work (no GPU in this trace)" in line for line in lines), lines


def test_a_gpu_trace_keeps_dispatch_and_launches():
    r = analyze_file(str(shared_trace("tl_h100_bert_small_sdpa_flash")))
    rows = [row for row in r["reading"] if row.get("host")]
    assert rows and all(row["host"].get("cpu_only", False) is False for row in rows)
    assert any("dispatch" in line and "in launches" in line for line in _host_lines(r))
