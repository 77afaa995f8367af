"""What a new user meets at the CLI (issue 27, item 9): a subcommand's own usage for its own
mistakes, annotate's output readable as every other file, and no terminal redraws in a log."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.conftest import REPO, recorded_trace


def cli(*args, preexec_fn=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), preexec_fn=preexec_fn)


@pytest.mark.parametrize("args,usage,message", [
    (("report", "x.json", "--jsn"), "usage: tb-attn report ", "tb-attn: error: unrecognized arguments: --jsn"),
    (("compare", "x.json"), "usage: tb-attn compare ", "tb-attn: error: compare needs at least two paths"),
])
def test_a_subcommand_mistake_prints_that_subcommands_usage(args, usage, message):
    proc = cli(*args, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith(usage), proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == message
    assert "{report,compare" not in proc.stderr  # not the top-level usage


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_annotate_writes_its_output_under_the_umask(tmp_path, umask, mode):
    out = tmp_path / "a.json.gz"
    proc = cli("annotate", str(recorded_trace("sdpa")), "-o", str(out), "-q", preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode  # as any file the user writes, not mkstemp's 0600
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tb-attn-annotate-")]


def _extras() -> dict[str, list[str]]:
    """setup.py's extras_require, read as data (the dict literal), without running setup()."""
    import ast

    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no extras_require")


def test_the_readmes_first_command_installs_what_the_demo_runs():
    import re

    first = next(line for line in (REPO / "README.md").read_text().splitlines() if "python -m demo" in line)
    extras = re.search(r"-e '\.\[([a-z,]+)\]'", first).group(1).split(",")
    installed = {re.split(r"[<>=\[]", req)[0] for extra in extras for req in _extras()[extra]}
    # demo/models.py builds its tiny Llama variants (in the default set) with transformers
    assert "transformers" in installed, (first, extras)
    assert "hf-eager" in (REPO / "demo" / "__main__.py").read_text()


_MADVISE = ("import sys, os; from tb_attn_plugin import cli; cli.main(['patterns']); import numpy; "
            "print(os.environ['NUMPY_MADVISE_HUGEPAGE'], numpy._core.multiarray._get_madvise_hugepage(), file=sys.stderr)")


@pytest.mark.parametrize("chosen,expected", [(None, "0 False"), ("1", "1 True")])
def test_numpy_asks_for_no_huge_pages_unless_the_user_chose(chosen, expected):
    """A command that reads traces turns numpy's huge-page request off before numpy is imported (the
    2 GB trace's system time, bench/README.md), and keeps the user's own NUMPY_MADVISE_HUGEPAGE."""
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if chosen is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = chosen
    proc = subprocess.run([sys.executable, "-c", _MADVISE], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=dict(env, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == expected
