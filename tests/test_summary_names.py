"""Summary numbers that agree (issue 46, item 10): the headline names the largest stage truthfully (a QKV projection
of most of the time is not 'other work takes the most'), each achieved rate says what time it is over, and one
layer has one name in every view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file


def _record(tmp: Path, name: str, fn, *, modules: bool = True) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    torch.set_num_threads(1)
    fn(torch)  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=modules) as prof:
        fn(torch)
    out = tmp / f"{name}.json"
    prof.export_chrome_trace(str(out))
    return out


def _wide_mha(torch):
    """nn.MultiheadAttention in training (its explicit path) with a wide model and 8 tokens: the input projection's
    3·L·D² FLOPs are 3·8·1024² = 25 M, QKᵀ and AV's 2·L²·D = 131 K each, so the projection outweighs the core."""
    from torch import nn

    m = nn.MultiheadAttention(1024, 8, batch_first=True)
    x = torch.randn(1, 8, 1024)
    for _ in range(3):
        m(x, x, x)[0].sum().backward()


def _events(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())["traceEvents"]


def test_the_headline_names_a_projection_that_outweighs_the_core(tmp_path):
    path = _record(tmp_path, "wide_mha", _wide_mha)
    evs = _events(path)
    # the walker: the input projection is the first aten::linear inside each MultiheadAttention module call
    mods = [e for e in evs if re.match(r"nn\.Module: MultiheadAttention_\d+$", e.get("name", ""))]
    assert len(mods) == 3
    ops = sorted((e for e in evs if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    proj = sum(next(o["dur"] for o in ops if o["name"] == "aten::linear" and o["tid"] == m["tid"]
                    and m["ts"] <= o["ts"] <= m["ts"] + m["dur"]) for m in mods)
    assert proj > 0.5 * sum(m["dur"] for m in mods)  # the projection is most of the module's forward
    r = analyze_file(str(path))
    msg = next(v["message"] for v in r["verdicts"] if v["id"] == "eager_attention")
    assert ": the QKV projection takes the most, " in msg and "other work" not in msg, msg
    key = f"{r['time_basis']}_us"
    share = sum(s[key] for s in r["stages"] if s["stage"] == "qkv_proj") / sum(s[key] for s in r["stages"])
    assert f"takes the most, {share * 100:.0f}% of attention time" in msg, (msg, share)
