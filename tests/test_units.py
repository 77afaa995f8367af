"""text/units.py: one place for rates and their text, and the roofline line that uses it (issue 27,
items 4 and 8): one bound per point, small rates in their own unit, never '0.0 TFLOP/s'."""

from __future__ import annotations

import pytest

from tb_attn_plugin.text.units import bandwidth_text, flops_rate_pair_text, flops_rate_text
from tb_attn_plugin.roofline import roof
from tb_attn_plugin.roofline.section import line


@pytest.mark.parametrize("tflops,text", [(0.0217, "21.7 GFLOP/s"), (1.234, "1.23 TFLOP/s"), (0.0005, "500 MFLOP/s"),
                                         (None, "unknown"), (float("nan"), "unknown")])
def test_flop_rates_keep_their_digits(tflops, text):
    assert flops_rate_text(tflops) == text


@pytest.mark.parametrize("tbs,text", [(3.35, "3.35 TB/s"), (0.0365, "36.5 GB/s"), (0.000572, "572 MB/s"), (None, "unknown")])
def test_bandwidths_in_their_unit(tbs, text):
    assert bandwidth_text(tbs) == text


def test_a_pair_of_rates_reads_in_one_unit():
    assert flops_rate_pair_text(0.0217, 0.1958) == "21.7 of 196 GFLOP/s"  # was "0.0217 of 0.1958 TFLOP/s"


def _cpu_row():
    """A CPU point whose whole-row intensity is above the ridge (compute) while its slowest stage,
    softmax, is below it (memory): the demo's eager layer on a measured CPU roof."""
    the_roof = {"tflops": {"fp32": 0.1958}, "bandwidth_tbs": 0.0365}
    # times under the roof (a point above it is flagged instead: tests/test_roof_check.py)
    soft = {"stage": "softmax", "pass": "fwd", **roof.point(2e6, 4e6, 40000.0, 4, the_roof, "fp32", "ops")}
    mm = {"stage": "qk_matmul", "pass": "fwd", **roof.point(4e9, 2e6, 30000.0, 4, the_roof, "fp32", "ops")}
    row = {"label": "eager attention (eager)", **roof.point(4.002e9, 6e6, 70000.0, 8, the_roof, "fp32", "ops"),
           "stages": [soft, mm]}
    assert soft["bound"] == "memory" and row["bound"] == "compute"
    return row


def test_the_line_states_the_rows_own_bound_not_its_slowest_stages():
    row = _cpu_row()
    text = line(row)
    assert text.startswith("eager attention (eager): compute-bound, ") and "memory-bound" not in text
    assert "GFLOP/s" in text and "0.0 TFLOP/s" not in text and text.endswith("most time in softmax fwd")


def test_the_safety_nets_warning_agrees_in_number():
    from tb_attn_plugin.attention.safety import warning_line

    one = warning_line([{"name": "my_fmha_fwd", "share": 0.1}])
    assert "1 kernel name looks like attention but matches no kernel family" in one  # was "... but match"
    two = warning_line([{"name": "a_fmha", "share": 0.1}, {"name": "b_fmha", "share": 0.1}])
    assert "2 kernel names look like attention but match no kernel family" in two


# --- times by magnitude, peaks with their unit, in every text report (issue 47, item 3) ---------------

import re  # noqa: E402

from tb_attn_plugin.text.units import duration_text  # noqa: E402

BIG_MICROSECONDS = re.compile(r"(?<![\d.])\d{4,}(?:\.\d+)? ?µs")  # '171559.4 µs': a time that should be ms or s
# a peak followed by a bare number: 'dense 16-bit peak (990)', 'peak 990,' (a unit or % must follow the number)
BARE_PEAK = re.compile(r"peaks?\s*\(?\s*(\d[\d.,]*)(?![\d.])(?!\s*(?:[kMGT]?FLOP/s|[kMGT]?B/s|[KMG]iB|B\b|%|×))")


@pytest.mark.parametrize("us,text", [(171559.4, "171.56 ms"), (999.9, "999.9 µs"), (999.96, "1.00 ms"),
                                     (12.34, "12.3 µs"), (-2.5e6, "-2.50 s"), (None, "unknown")])
def test_times_pick_their_unit_by_magnitude(us, text):
    assert duration_text(us) == text


def test_the_scan_catches_what_it_is_for():
    assert BIG_MICROSECONDS.search("host: 171559.4 µs per call") and BIG_MICROSECONDS.search("10000 µs")
    assert not BIG_MICROSECONDS.search("999.9 µs, 171.56 ms, 1.5 µs")
    assert BARE_PEAK.search("the H100 dense 16-bit peak (990)") and BARE_PEAK.search("peak 990, measured")
    assert not BARE_PEAK.search("dense 16-bit peak (990 TFLOP/s)") and not BARE_PEAK.search("peaks fp32 67 TFLOP/s")
    assert not BARE_PEAK.search("63% of peak") and not BARE_PEAK.search("peak 45%")


def _text_reports(paths):
    from tb_attn_plugin.report.build import analyze_file
    from tb_attn_plugin.report.text import render

    return {p.name: render(analyze_file(str(p))) for p in paths}


def _assert_units(texts):
    for name, text in texts.items():
        big = BIG_MICROSECONDS.findall(text)
        bare = [m.group(0) for m in BARE_PEAK.finditer(text)]
        assert not big, f"{name}: times in µs that read as ms or s: {big[:5]}"
        assert not bare, f"{name}: peaks without a unit: {bare[:5]}"


def test_no_five_digit_microseconds_or_bare_peaks_in_shared_trace_reports(shared_traces):
    _assert_units(_text_reports(sorted(shared_traces.glob("*.json.gz"))))


def test_no_five_digit_microseconds_or_bare_peaks_in_recorded_cpu_reports(recorded_traces, cpu_traces):
    _assert_units(_text_reports(sorted(recorded_traces.glob("*.json.gz")) + sorted(cpu_traces.values())))
