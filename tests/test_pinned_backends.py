"""Pinned SDPA backends (issue 46, item 5): the collector records which backends sdpa_kernel left enabled at each
call (tag field ``sdp``), and why-not-flash says "pinned to math by sdpa_kernel" where it said "not recorded".
The truth each test compares with is what PyTorch did, read from the raw events: whether the CPU flash op ran."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from urllib.parse import parse_qs

import msgspec
import pytest

from tb_attn_plugin.report.build import analyze_file

CPU_FLASH_OP = "aten::_scaled_dot_product_flash_attention_for_cpu"


def _collect(tmp: Path, pin: str | None) -> Path:
    """The cpu_models SDPA layers (is_causal, no dropout: the CPU flash kernel takes them) under the collector,
    inside ``with sdpa_kernel(SDPBackend.<pin>)`` when ``pin`` is given."""
    torch = pytest.importorskip("torch")
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tb_attn_plugin
    from tests.cpu_models import B, D, L, model

    torch.manual_seed(0)
    m, x = model("sdpa"), torch.randn(B, L, D)
    ctx = sdpa_kernel(getattr(SDPBackend, pin)) if pin else contextlib.nullcontext()
    with ctx, tb_attn_plugin.profile(str(tmp), model=m, scalars=False,
                                     schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        for _ in range(2):
            with torch.no_grad():
                m(x)
            prof.step()
    return Path(prof.traces[0])


def _events(path: Path) -> list[dict]:
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def _tags(evs) -> list[dict]:
    return [parse_qs(e["name"][len("tb_attn::call "):]) for e in evs if e.get("name", "").startswith("tb_attn::call ")]


def _flash_cpu(path: Path) -> dict:
    r = analyze_file(str(path))
    (w,) = {json.dumps(msgspec.to_builtins(lay.why_not_flash), sort_keys=True) for lay in r["layers"]}
    got = json.loads(w)
    (b,) = [b for b in got["backends"] if b["backend"] == "flash_cpu"]
    return b


def test_a_call_pinned_to_math_is_said_to_be(tmp_path):
    path = _collect(tmp_path, "MATH")
    evs = _events(path)
    tags = _tags(evs)
    assert tags and all(t["sdp"] == ["math"] for t in tags)  # what sdpa_kernel left on, per call
    assert not any(e.get("name") == CPU_FLASH_OP for e in evs)  # PyTorch ran math: the pin refused flash
    b = _flash_cpu(path)
    assert b["eligible"] is False
    (refusal,) = b["refusals"]
    assert refusal["check"] == "check_runtime_disabled_flash"
    assert "pinned to math by sdpa_kernel" in refusal["reason"]
    assert not [u for u in b["unknown"] if u["check"] == "check_runtime_disabled_flash"]


def test_an_unpinned_call_passes_the_switch_and_ran_flash(tmp_path):
    path = _collect(tmp_path, None)
    evs = _events(path)
    assert all(set(t["sdp"][0].split(",")) >= {"flash", "math"} for t in _tags(evs))
    assert any(e.get("name") == CPU_FLASH_OP for e in evs)
    b = _flash_cpu(path)
    assert b["eligible"] is True and b["refusals"] == [] and b["unknown"] == []


def test_a_trace_without_the_tag_still_says_not_recorded(tmp_path):
    from tests.test_kernel_reading import _record, _sdpa

    path = _record(tmp_path, "plain", _sdpa((2, 4, 16, 64), (2, 4, 16, 64)))
    r = analyze_file(str(path))
    (lay,) = r["layers"]
    (b,) = lay.why_not_flash.backends
    (u,) = [u for u in b.unknown if u.check == "check_runtime_disabled_flash"]
    assert "not recorded" in u.why
