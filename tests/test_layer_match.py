"""One layer, one name across the variants of a model (issue 27, item 5): the collector names the
attention module around an eager motif by its module path, as it names SDPA calls, and compare
pairs a compiled run's layers (no hooks inside a compiled frame) by position and shape."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from tb_attn_plugin.format.report.layers import Layer, Shape
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.compare import compare_reports
from tb_attn_plugin.report.layer_match import match_layers
from tests.conftest import REPO, recorded_trace

_RECORD = r"""
import json, sys, torch, tb_attn_plugin
sys.path.insert(0, sys.argv[2])
from tests.cpu_models import B, D, L, model
out = {}
for variant in ("eager", "sdpa", "compiled"):
    torch.manual_seed(0)
    m = model("sdpa" if variant == "compiled" else variant)
    run = torch.compile(m, backend="eager") if variant == "compiled" else m
    x = torch.randn(B, L, D)
    run(x).sum().backward()  # compiled (or warmed up) before the window
    with tb_attn_plugin.profile(f"{sys.argv[1]}/{variant}", model=run, variant=variant, scalars=False, memory=True,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(3):
            run(x).sum().backward()
            prof.step()
    out[variant] = prof.traces[-1]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("variants")
    proc = subprocess.run([sys.executable, "-c", _RECORD, str(root), str(REPO)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(proc.stdout.strip().splitlines()[-1])
    return {v: analyze_file(p) for v, p in paths.items()}


def _names(report):
    return sorted(lay.layer for lay in report["layers"])


def test_eager_motif_is_named_by_its_module_path_as_sdpa_is(variants):
    assert _names(variants["eager"]) == _names(variants["sdpa"]) == ["0", "1"]  # nn.Sequential's named_modules
    assert {lay.layer_type for lay in variants["eager"]["layers"]} == {"Attn"}
    assert {lay.implementation for lay in variants["eager"]["layers"]} == {"eager"}


def test_compare_pairs_every_variants_layers(variants):
    runs = [(v, variants[v]) for v in ("eager", "sdpa", "compiled")]
    keys = match_layers([r for _, r in runs])
    assert [sorted(set(k.values())) for k in keys] == [["0", "1"]] * 3  # compiled: by position and shape
    doc = compare_reports(runs)
    (row,) = doc["layers"]  # one row, no "absent" / "new"
    own = [t for _, r in runs for t in dict.fromkeys(lay.layer_type for lay in r["layers"]) if t != "Attn"]
    assert row["layer_type"] == " = ".join(["Attn", *own]) and all(v > 0 for v in row["values"])
    assert row["layers"][0] == ["0", "1"] and len(row["layers"][2]) == 2
    mem_rows = {r["layer"]: r for r in doc["memory"]["layers"]}
    assert sorted(mem_rows) == ["0", "1"]
    assert all(None not in r["peak_growth_bytes"] for r in mem_rows.values())


@pytest.fixture(scope="module")
def real_layer() -> Layer:
    """A layer row of a recorded CPU trace, renamed and reshaped below into the layers a test needs."""
    return analyze_file(str(recorded_trace("sdpa")))["layers"][0]


def _layer(real: Layer, name: str, **shape: int) -> Layer:
    return msgspec.structs.replace(real, layer=name, shape=Shape(**shape))


def test_layers_of_other_shapes_never_pair(real_layer):
    a = {"layers": [_layer(real_layer, "eager#0", q_len=128, k_len=128, q_heads=4, head_dim=16)]}
    b = {"layers": [_layer(real_layer, "flash#0", q_len=256, k_len=256, q_heads=4, head_dim=16)]}
    assert match_layers([a, b]) == [{"eager#0": "eager#0"}, {"flash#0": "flash#0"}]


def test_a_run_never_puts_two_of_its_layers_under_one_name(real_layer):
    shape = {"q_len": 128, "k_len": 128, "q_heads": 4, "head_dim": 16}
    a = {"layers": [_layer(real_layer, "model.0", **shape)]}
    b = {"layers": [_layer(real_layer, "model.0", **shape), _layer(real_layer, "eager#0", **shape)]}
    keys = match_layers([a, b])
    assert keys[1] == {"model.0": "model.0", "eager#0": "eager#0"}
