"""The chunked reader gives exactly what a whole-document decode gives, whatever the chunk size,
and falls back to the whole decode when a chunk boundary lands inside a string."""

from __future__ import annotations

import gzip
import json

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.trace import events, rules
from tests.conftest import recorded_trace, shared_trace


def _strip(r):
    r = dict(r)
    r.pop("analysis_seconds", None)
    return r


@pytest.mark.parametrize("name", ["tl_h100_bert_small_sdpa_flash", "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph"])
def test_small_chunks_change_nothing(monkeypatch, name):
    path = str(shared_trace(name))
    whole = _strip(analyze_file(path))
    monkeypatch.setattr(rules, "CHUNK_BYTES", 4096)
    calls = []

    class Counting:
        def __init__(self, real):
            self.real = real

        def decode(self, buf):
            calls.append(len(buf))
            return self.real.decode(buf)

    monkeypatch.setattr(events, "_list_decoder", Counting(events._list_decoder))
    monkeypatch.setattr(events, "_routed_decoder", Counting(events._routed_decoder))  # the scanner's lists
    chunked = _strip(analyze_file(path))
    assert len(calls) > 50  # really decoded in many chunks
    assert chunked == whole


def test_boundary_inside_a_string_falls_back(tmp_path, monkeypatch):
    doc = json.loads(gzip.decompress(recorded_trace("sdpa").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op":
            e["name"] = e["name"] + ' },{ "ph": "X" },{'
            break
    p = tmp_path / "w.1.pt.trace.json"
    p.write_text(json.dumps(doc, indent=1))
    monkeypatch.setattr(rules, "CHUNK_BYTES", 64)
    r = analyze_file(str(p))
    assert r["calls"] == 2 and not r["warnings"]
    assert sum(k["count"] for k in r["ops"] if k["name"] == "aten::_scaled_dot_product_flash_attention_for_cpu") == 2
