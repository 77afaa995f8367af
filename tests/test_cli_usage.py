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
