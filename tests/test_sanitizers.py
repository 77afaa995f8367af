"""The two C extensions under AddressSanitizer and UBSan, short runs on every CI submission: the event
scanner on a real trace and 400 mutated pieces of it (scripts/asan_scanner.sh), the op tree's stack
pass of the same extension on a real trace's ops and 400 random column sets (scripts/asan_op_tree.sh),
the snapshot decoder on a real-format snapshot in every window size and 400 mutated pickles
(scripts/asan_snapshot_decoder.sh).
An out-of-bounds access aborts the script with the sanitizer's report, and the test shows it. The long
runs (thousands of cases each) stay by hand: docs/robustness.md."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, recorded_trace

REPO = Path(__file__).resolve().parent.parent
SHORT = "400"


def _sanitizers() -> None:
    gcc = shutil.which("gcc")
    lib = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip() if gcc else ""
    if not gcc or not os.path.isabs(lib):
        if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
            pytest.fail("gcc with libasan is needed for the sanitizer runs (scripts/test.sh builds the extensions with it)")
        pytest.skip("no gcc with libasan here: the sanitizer runs need it")


def _run(script: str, **env: str) -> str:
    _sanitizers()
    proc = subprocess.run(["bash", f"scripts/{script}", SHORT], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PY=sys.executable, **env))
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


def _real_trace() -> str:
    """The real H100 trace when ../shared is there, else a CPU trace the suite records: the same code paths."""
    shared = SHARED_TRACES / "tl_h100_owlv2_eager_bmm_softmax.json.gz"
    return str(shared if shared.exists() else recorded_trace("eager"))


def test_event_scanner_under_asan_and_ubsan():
    out = _run("asan_scanner.sh", TRACE=_real_trace())
    assert f"{SHORT} mutated pieces: no memory error" in out and "whole trace routed" in out


def test_op_tree_pass_under_asan_and_ubsan():
    out = _run("asan_op_tree.sh", TRACE=_real_trace())
    assert "real trace:" in out and f"{SHORT} random cases: no memory error" in out


def test_snapshot_decoder_under_asan_and_ubsan():
    out = _run("asan_snapshot_decoder.sh")
    assert f"then {SHORT} mutated pickles" in out and "no memory error" in out
