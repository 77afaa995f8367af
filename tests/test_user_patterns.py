"""User kernel families from TOML: accepted in exactly the documented form, refused with one line
naming the file and the row otherwise; `tb-attn patterns` shows the effective table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tb_attn_plugin.attention import patterns as P
from tb_attn_plugin.attention import user_table as U

GOOD = '''
[[family]]
name = "my_attention_fwd"
pattern = "my_attn_fwd_kernel"   # a regular expression (RE2 syntax), searched in the kernel name
stage = "fused"                  # any stage, or "exclude"
pass = "fwd"                     # fwd, bwd, or "" when the op decides
implementation = "custom"
example = "my_attn_fwd_kernel<128>"
source = "where this name was seen"
'''


@pytest.fixture(autouse=True)
def _no_user_rows():
    yield
    P.set_user_families(())


def write(tmp_path, text, name="mine.toml"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(p)


def test_the_documented_form_loads_and_wins_over_built_in_rows(tmp_path):
    rows = U.install([write(tmp_path, GOOD + GOOD.replace("my_attention_fwd", "not_gemm").replace(
        '"my_attn_fwd_kernel"', '"^cutlass_75_special"').replace('"fused"', '"exclude"').replace(
        "my_attn_fwd_kernel<128>", "cutlass_75_special_gemm"))])
    assert [r.family for r in rows] == ["my_attention_fwd", "not_gemm"]
    fam = P.kernel_family("void my_attn_fwd_kernel<64>(Params)")
    assert fam.family == "my_attention_fwd" and fam.stage == "fused" and fam.implementation == "custom"
    assert P.kernel_family("cutlass_75_special_gemm_x").stage is None  # a user exclusion beats the gemm row
    assert P.kernel_family("cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_tn_align1").family == "gemm"
    P.set_user_families(())
    assert P.kernel_family("void my_attn_fwd_kernel<64>(Params)") is None


@pytest.mark.parametrize("text,needle", [
    (GOOD.replace('"my_attn_fwd_kernel<128>"', '"other_kernel"'), "does not match its own 'example'"),
    (GOOD.replace('"my_attn_fwd_kernel"', '"my_attn_fwd_kernel(("'), "not a pattern RE2 accepts"),
    (GOOD.replace('"my_attn_fwd_kernel"', '"(?<=my_)attn_fwd_kernel"'), "RE2 has no lookaround"),
    (GOOD.replace('stage = "fused"', 'stage = "fusedd"'), "unknown stage 'fusedd'"),
    (GOOD.replace('pass = "fwd"', 'pass = "forward"'), "unknown pass 'forward'"),
    (GOOD.replace('source = "where this name was seen"', ''), "missing key 'source'"),
    (GOOD.replace('implementation = "custom"', 'implementation = "custom"\ncolour = "red"'), "unknown key 'colour'"),
    (GOOD.replace('pass = "fwd"', 'pass = 1'), "'pass' must be a string"),
    (GOOD + GOOD, "the same name is used by an earlier row"),
    ("[[family]\nname = 1", "not valid TOML"),
    ("[other]\nx = 1\n", "unknown top-level key 'other'"),
    ("", "no [[family]] rows"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    ("x = " + "[" * 50000 + "]" * 50000, "nested too deeply"),
    (GOOD.replace('pattern = "my_attn_fwd_kernel"', 'pattern = "(x{1000}){1000}"'), "not a pattern RE2 accepts"),
    ("x" * (U.MAX_FILE_BYTES + 1), "at most"),
    (GOOD * 1 + "".join(GOOD.replace("my_attention_fwd", f"r{i}") for i in range(U.MAX_ROWS)), "rows; at most"),
])
def test_bad_files_name_the_file_and_the_row(tmp_path, text, needle):
    path = write(tmp_path, text)
    with pytest.raises(U.PatternError) as exc:
        U.install([path])
    msg = str(exc.value)
    assert msg.startswith(path) and needle in msg and "\n" not in msg
    if "[[family]] #" in msg:
        assert "#1" in msg or "#2" in msg
    assert P.user_families() == ()  # nothing half-installed


def test_missing_file(tmp_path):
    with pytest.raises(U.PatternError, match="cannot read the pattern file"):
        U.install([str(tmp_path / "nope.toml")])


def test_fingerprint_follows_the_contents(tmp_path):
    path = write(tmp_path, GOOD)
    a = U.fingerprint([path])
    assert a and U.fingerprint([path]) == a and U.fingerprint([]) == ""
    write(tmp_path, GOOD.replace("where this name", "where that name"))
    assert U.fingerprint([path]) != a
    assert U.env_paths(f"{path}{os.pathsep}{path}") == [path, path]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_patterns_lists_the_effective_table(tmp_path):
    p = cli("patterns", "--json")
    rows = json.loads(p.stdout)["families"]
    assert len(rows) == len(P.KERNEL_FAMILIES) and all(r["origin"] == "built-in" for r in rows)
    path = write(tmp_path, GOOD)
    p = cli("patterns", "--patterns", path)
    assert p.returncode == 0
    first = p.stdout.splitlines()[1]
    assert first.startswith("my_attention_fwd") and "user" in first
    assert f"{len(P.KERNEL_FAMILIES) + 1} families" in p.stdout


@pytest.mark.parametrize("command", [["patterns"], ["report", "x.json"], ["compare", "a", "b"],
                                     ["annotate", "x.json", "-o", "y.json"], ["sweep", "--logdir", "sweep_out"]])
def test_every_command_refuses_a_bad_file_with_one_line(tmp_path, command):
    path = write(tmp_path, GOOD.replace('"my_attn_fwd_kernel<128>"', '"nothing alike"'))
    p = cli(*command, "--patterns", path)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "my_attention_fwd" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("pattern,bad", [("(a+)+", True), ("(x*y)*z", True), ("(a|b+){2,}", True), ("((a+))+", True),
                                         ("(.*a){20}", True), (r"\(a+\)+", False), ("[(a+)]+", False), ("(ab)+", False),
                                         ("(?:abc)+x+", False), ("(a+)?", False), ("x(?=y+)", False)])
def test_nested_quantifiers_are_found(pattern, bad):
    """A lint for our own table (on Python's re); users' patterns run on RE2, where they are harmless."""
    assert U.nested_quantifier(pattern) is bad


def test_no_built_in_pattern_has_a_nested_quantifier():
    assert [f.family for f in P.KERNEL_FAMILIES if U.nested_quantifier(f.pattern)] == []


BACKTRACKER = "(a|aa)+$"  # no nested quantifier, yet exponential on a backtracking engine
SLOW_NAME = "a" * 44 + "!"


def _backtracking_file(tmp_path) -> str:
    return write(tmp_path, GOOD.replace('pattern = "my_attn_fwd_kernel"', f'pattern = "{BACKTRACKER}"').replace(
        '"my_attn_fwd_kernel<128>"', '"aaaa"'))


def test_a_pattern_that_backtracks_loads_and_matches_in_linear_time(tmp_path):
    rows = U.install([_backtracking_file(tmp_path)])
    try:
        assert [r.family for r in rows] == ["my_attention_fwd"]
        assert P.kernel_family(SLOW_NAME) is None  # Python's re: over 100 s here
        assert P.kernel_family("a" * 45).family == "my_attention_fwd"
    finally:
        P.set_user_families(())


def test_the_cli_reports_a_trace_with_a_hostile_kernel_name_under_a_backtracking_pattern(tmp_path):
    """``tb-attn report --patterns`` ran past 100 s on this (the 60 s bound only keeps a hang from
    stalling the suite)."""
    import gzip

    from tests.conftest import recorded_trace

    doc = json.loads(gzip.decompress(recorded_trace("sdpa").read_bytes()))
    op = next(e for e in doc["traceEvents"] if e.get("name") == "aten::scaled_dot_product_attention")
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": SLOW_NAME, "pid": 0, "tid": 7,
                               "ts": op["ts"] + 1, "dur": 3, "args": {"correlation": 99991}})
    trace = tmp_path / "t.pt.trace.json"
    trace.write_text(json.dumps(doc))
    try:
        p = subprocess.run([sys.executable, "-m", "tb_attn_plugin.cli", "report", str(trace), "--json",
                            "--patterns", _backtracking_file(tmp_path)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("tb-attn report hung on a backtracking user pattern")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["reports"][0]["kernel_table"]["user_families"] == 1
