"""Hostile inputs of issue 47, one builder per class: bent SDPA shapes, adversarial kernel names for
the built-in tables, junk before the C scanner, a FIFO as a pattern file, a hostile ``sweep.jsonl``,
paths and names, and the CLI's small faults. Each test fails on the code before the issue's fix.

The traces bent here are the real CPU traces the suite records (tests/recorded.py): one SDPA op
per call, ``Input Dims`` as torch.profiler writes them (``[[2, 4, 32, 16], ...]``)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys

import pytest

from tb_attn_plugin.attention import shapes
from tb_attn_plugin.reading import why_not_flash
from tests.conftest import REPO, recorded_trace

SDPA = "aten::scaled_dot_product_attention"


def cli(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


def one_error_line(proc, code: int = 2) -> str:
    """The CLI's contract for bad input: the exit status, one line on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- item 6: bent SDPA shapes ---------------------------------------------------------------------
def _recorded(role: str = "sdpa") -> dict:
    return json.loads(gzip.decompress(recorded_trace(role).read_bytes()))


BENDS = {
    # the key recorded with one dimension (was IndexError in why_not_flash._causal_square)
    "key_1d": lambda d: [d[0], [d[1][-1]], d[2], *d[3:]],
    # zero heads everywhere (was ZeroDivisionError in why_not_flash._heads_cudnn: q_heads % k_heads)
    "zero_heads": lambda d: [[x[0], 0, *x[2:]] for x in d[:3]] + d[3:],
    # 2-D q, k, v: an input SDPA's math path takes, fused ones refuse (was IndexError reading heads)
    "two_d": lambda d: [x[-2:] for x in d[:3]] + d[3:],
    # a dimension no tensor has
    "huge": lambda d: [[x[0], x[1], 10 ** 30, x[3]] for x in d[:3]] + d[3:],
}


def bent_sdpa_trace(tmp_path, bend: str) -> str:
    doc = _recorded("sdpa")
    n = 0
    for e in doc["traceEvents"]:
        if e.get("name") == SDPA and "Input Dims" in e.get("args", {}):
            e["args"]["Input Dims"] = BENDS[bend](e["args"]["Input Dims"])
            n += 1
    assert n, "the recorded trace has no SDPA op with Input Dims"
    path = tmp_path / f"bent_{bend}.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("bend", sorted(BENDS))
def test_bent_sdpa_shapes_give_a_report_with_the_reading_unknown(tmp_path, bend):
    path = bent_sdpa_trace(tmp_path, bend)
    proc = cli("report", "--json", path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (r,) = json.loads(proc.stdout)["reports"]
    assert r["calls"] > 0
    for lay in r["layers"]:
        if bend == "two_d":  # read: every fused backend refuses 2-D inputs, the other checks are unknown
            backends = lay["why_not_flash"]["backends"]
            assert all(b["eligible"] is False for b in backends)
            assert all([x["check"] for x in b["refusals"]] == ["check_tensor_shapes"] for b in backends)
            assert all("q 2-D, k 2-D, v 2-D" in b["refusals"][0]["reason"] for b in backends)
        else:
            assert lay["why_not_flash"] is None
            assert lay["why_not_flash_unknown"].startswith(f"unknown: its {SDPA} recorded a shape it cannot read")


def test_the_plugin_worker_answers_a_report_not_please_report_this(tmp_path):
    from tb_attn_plugin.plugin import work

    for bend in ("key_1d", "zero_heads"):
        status, error, _, _ = work.analyze(bent_sdpa_trace(tmp_path, bend), f"run/{bend}.json")
        assert status != "error", error


def test_one_helper_says_why_a_shape_is_bent():
    assert shapes.sdpa_qkv([[2, 4, 8, 16]] * 3) == ([[2, 4, 8, 16]] * 3, None)
    assert shapes.sdpa_qkv([[2, 4, 8, 16], [], [2, 4, 8, 16]]) == (None, None)  # not recorded: no shapes
    assert shapes.sdpa_qkv([[2, 4, 8, 16], [16], [2, 4, 8, 16]])[1] == (
        "key: 1 dimension ([16]) where at least 2 are needed")
    assert shapes.sdpa_qkv([[2, 0, 8, 16]] * 3)[1] == "query: heads 0 ([2, 0, 8, 16])"
    assert shapes.sdpa_qkv([[2, 4, 8, -1]] * 3)[1] == "query: a shape no tensor has ([2, 4, 8, -1])"
    assert shapes.sdpa_qkv([[2, 4, 8, "16"]] * 3)[1].startswith("query: a shape no tensor has")
    x, why = why_not_flash.inputs_of([[2, 4, 8, 16], [2, 4, 8, 16], [2, 4, 8, 16], [8, -3]], None, None, None, None)
    assert why is None and x.mask_known is False  # a bent mask is not "no mask"
