"""What a new user types at the CLI: several paths and patterns, --version, compare's inputs (warnings,
logdirs, the same file twice), empty arguments, and the wording of counts and long names."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from tb_attn_plugin.text.words import cut, plural
from tb_attn_plugin.format.version import ENGINE_VERSION, SCHEMA_VERSION, __version__
from tests.conftest import REPO, recorded_trace


def cli(*args, cwd=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))


@pytest.fixture
def runs(tmp_path):
    """A logdir of two runs, one of them with two spans, and loose trace files."""
    for run, role in (("a", "sdpa"), ("b", "math")):
        (tmp_path / "logdir" / run).mkdir(parents=True)
        (tmp_path / "logdir" / run / "w.1.pt.trace.json.gz").write_bytes(recorded_trace(role).read_bytes())
    (tmp_path / "logdir" / "b" / "w.2.pt.trace.json.gz").write_bytes(recorded_trace("eager").read_bytes())
    for role in ("small", "sdpa", "eager"):
        (tmp_path / f"{role}.json.gz").write_bytes(recorded_trace(role).read_bytes())
    return tmp_path


def test_version():
    from tb_attn_plugin.memory import fast_pickle
    from tb_attn_plugin.trace import native

    proc = cli("--version")
    built = {True: "built", False: "NOT built"}
    assert proc.returncode == 0 and proc.stdout.strip() == (
        f"tb-attn {__version__} (engine {ENGINE_VERSION}, report schema {SCHEMA_VERSION}; "
        f"native event scanner {built[native.available]}, snapshot decoder {built[fast_pickle.available()]})")
    if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):  # scripts/test.sh: the install must have built both
        assert "NOT built" not in proc.stdout


# An install without a C compiler: the scanner's module cannot be imported.
NO_SCANNER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "tb_attn_plugin.trace._scanner":
            raise ImportError("blocked: as if no compiler had built it")
sys.meta_path.insert(0, Block())
from tb_attn_plugin.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_native_scanner_report_warns_once_and_version_says_so(runs):
    run = lambda *a: subprocess.run([sys.executable, "-c", NO_SCANNER, *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=300, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    proc = run("report", str(runs / "small.json.gz"), str(runs / "eager.json.gz"), "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("native event scanner NOT built") == 1 and "about 2x slower" in proc.stderr
    assert "native event scanner NOT built" in run("--version").stdout
    assert "NOT built" not in cli("report", str(runs / "small.json.gz"), "-q").stderr or not os.environ.get(
        "TB_ATTN_REQUIRE_NATIVE")


def test_report_takes_every_path_given(runs):
    proc = cli("report", str(runs / "small.json.gz"), str(runs / "eager.json.gz"), str(runs / "logdir"), "-q")
    assert proc.returncode == 0, proc.stderr
    heads = [line for line in proc.stdout.splitlines() if line and not line.startswith(" ")]
    assert heads == [str(runs / "small.json.gz"), str(runs / "eager.json.gz")] + [
        str(runs / "logdir" / r / f"w.{s}.pt.trace.json.gz") for r, s in (("a", 1), ("b", 1), ("b", 2))]
    doc = json.loads(cli("report", str(runs / "small.json.gz"), str(runs / "eager.json.gz"), "--json", "-q").stdout)
    assert [r["calls"] for r in doc["reports"]] == [1, 2]


def test_report_expands_a_pattern_the_shell_left_alone(runs):
    proc = cli("report", "*.json.gz", "-q", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.endswith(".json.gz")] == [
        "eager.json.gz", "sdpa.json.gz", "small.json.gz"]
    proc = cli("report", "nothing-*.json", cwd=runs)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "tb-attn: error: nothing-*.json: no file or directory matches this pattern")


def test_an_empty_path_argument_says_so(runs):
    proc = cli("report", "", str(runs / "small.json.gz"), "-q")
    assert proc.returncode == 2 and "attention: 1 call," in proc.stdout
    assert "tb-attn: error: '': empty path argument" in proc.stderr
    proc = cli("compare", "", str(runs / "small.json.gz"))
    assert proc.returncode == 2 and "empty path argument" in proc.stderr and "Traceback" not in proc.stderr


def test_singular_and_plural(runs):
    out = cli("report", str(runs / "small.json.gz"), "-q").stdout
    assert "attention: 1 call," in out and "cpu_fused in 1 call" in out and "1 calls" not in out
    assert " 0 profiler steps" in out
    assert (plural(1, "profiler step"), plural(2, "call"), plural(0, "call")) == ("1 profiler step", "2 calls", "0 calls")


def test_long_names_are_cut_with_an_ellipsis(tmp_path):
    doc = json.loads(gzip.decompress(recorded_trace("small").read_bytes()))
    from tb_attn_plugin.report.build import analyze_file
    from tb_attn_plugin.report.text import render

    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    r = analyze_file(str(path))
    r["layers"][0].layer = "encoder.layers." + "very_long_module_name." * 10 + "attn"
    text = render(r)
    row = next(line for line in text.splitlines() if line.strip().startswith("encoder.layers."))
    assert "…" in row and "attn " not in row
    assert cut("abcdef", 4) == "abc…" and cut("abcdef", 4, keep_end=True) == "…def" and cut("abc", 4) == "abc"


def test_compare_refuses_a_logdir_and_names_its_runs(runs):
    proc = cli("compare", str(runs / "logdir"), str(runs / "small.json.gz"), "-q")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"tb-attn: error: {runs / 'logdir'}: holds 2 runs (a, b); compare takes trace files or run directories" in proc.stderr


def test_compare_says_which_file_of_a_run_it_takes(runs):
    proc = cli("compare", str(runs / "logdir" / "a"), str(runs / "logdir" / "b"), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "comparing w.2.pt.trace.json.gz (worker w, latest span) of its 2 trace files" in proc.stderr
    assert "eager" in proc.stdout.splitlines()[0]  # b's latest span is the eager trace


def test_compare_labels_two_identical_inputs_distinctly(runs):
    p = str(runs / "sdpa.json.gz")
    doc = json.loads(cli("compare", p, p, "--json", "-q").stdout)
    assert doc["runs"] == ["sdpa.json.gz (1)", "sdpa.json.gz (2)"]
    assert len(doc["kernels_only_in"]) == 2
    # Same base name in two directories: the directory tells them apart.
    (runs / "x").mkdir(), (runs / "y").mkdir()
    for d in ("x", "y"):
        (runs / d / "t.json.gz").write_bytes(recorded_trace("small").read_bytes())
    doc = json.loads(cli("compare", str(runs / "x" / "t.json.gz"), str(runs / "y" / "t.json.gz"), "--json", "-q").stdout)
    assert doc["runs"] == ["x/t.json.gz", "y/t.json.gz"]


def test_compare_prints_the_warnings_of_a_side_cut_short(runs):
    gz = recorded_trace("sdpa").read_bytes()
    cut_path = runs / "cut.json.gz"
    cut_path.write_bytes(gz[: len(gz) * 3 // 4])
    proc = cli("compare", str(runs / "sdpa.json.gz"), str(cut_path), "-q")
    assert proc.returncode == 0, proc.stderr
    assert f"tb-attn: warning: {cut_path}: gzip stream ends early" in proc.stderr
    assert "  warning: cut.json.gz: gzip stream ends early" in proc.stdout
    # --json: the warnings are in the comparison itself, under the side's label
    doc = json.loads(cli("compare", str(runs / "sdpa.json.gz"), str(cut_path), "--json", "-q").stdout)
    assert list(doc["warnings"]) == ["cut.json.gz"]
    assert doc["warnings"]["cut.json.gz"][0].startswith("gzip stream ends early")


def test_json_failures_that_are_no_trace_s_own_are_a_json_object_too(runs):
    """A bad --patterns file with --json: one line on stderr and the error object on stdout."""
    bad = runs / "bad.toml"
    bad.write_text("not toml [[[")
    for command in ("report", "compare"):
        proc = cli(command, str(runs / "sdpa.json.gz"), str(runs / "small.json.gz"), "--patterns", str(bad), "--json")
        assert proc.returncode == 2 and proc.stderr.startswith(f"tb-attn: error: {bad}: not valid TOML")
        doc = json.loads(proc.stdout)
        assert doc["error"].startswith(f"{bad}: not valid TOML") and doc["errors"][0]["path"] == str(bad)
