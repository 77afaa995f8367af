"""Compare's noise test on many samples (found by scripts/fuzz_long.py, value case seed 1000709: a trace
compared with itself, its calls duplicated by the fuzzer): the smallest exact p of C(n1 + n2, n1)
orderings is a float even when that count is past a float's range, and compare answers."""

from __future__ import annotations

import math
import tempfile

from tb_attn_plugin.report import noise
from tests.fuzz_cases import judge_cli, make_case, run_cli_case


def test_min_p_of_samples_whose_orderings_overflow_a_float():
    assert math.comb(1200, 600) > 1e308  # 2.0 / C raised OverflowError: int too large to convert to float
    assert noise.min_p(600, 600) == 0.0
    assert noise.min_p(5, 5) == 2 / 252 and noise.min_p(0, 9) == 1.0


def test_the_fuzz_case_that_found_it_compares_cleanly():
    case = make_case(1000709)
    assert case.argv[0] == "compare"
    with tempfile.TemporaryDirectory() as where:
        rc, out, err, hung = run_cli_case(case, where)
        assert judge_cli(case, where, rc, out, err, hung) == []
        assert rc == 0
