"""GQA and MQA from a bare ``expand`` + ``reshape`` of K/V (issue 45, "What to build" 5): code that
repeats K/V heads the way transformers' repeat_kv does (k[:, :, None].expand(B, Hkv, r, L, D)
.reshape(B, Hkv·r, L, D)) but with no Python stack recorded: the QKᵀ matmul sees Q's heads on both
sides, and only aten::expand's recorded shapes (Input Dims, Concrete Inputs) show K/V's own heads.
Recorded here with torch.profiler on the CPU (record_shapes=True, no with_stack); the expected heads
are the models' own numbers, and the walker reads them back from the trace's expand events.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tb_attn_plugin.report.build import analyze_file  # noqa: E402


class Attn(nn.Module):
    def __init__(self, d: int, hq: int, hkv: int, rank5: bool = True):
        super().__init__()
        self.hq, self.hkv, self.hd, self.rank5 = hq, hkv, d // hq, rank5
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, hkv * self.hd), nn.Linear(d, hkv * self.hd)
        self.o = nn.Linear(d, d)

    def _repeat(self, t, b, l):
        if self.rank5:  # repeat_kv's way
            r = self.hq // self.hkv
            return t[:, :, None].expand(b, self.hkv, r, l, self.hd).reshape(b, self.hq, l, self.hd)
        return t.expand(b, self.hq, l, self.hd)  # one K/V head broadcast to every query head

    def forward(self, x):
        b, l, _ = x.shape
        q = self.q(x).view(b, l, self.hq, self.hd).transpose(1, 2)
        k = self._repeat(self.k(x).view(b, l, self.hkv, self.hd).transpose(1, 2), b, l)
        v = self._repeat(self.v(x).view(b, l, self.hkv, self.hd).transpose(1, 2), b, l)
        w = torch.softmax(q @ k.transpose(-1, -2) / self.hd ** 0.5, dim=-1)
        return self.o((w @ v).transpose(1, 2).reshape(b, l, -1))


def _record(path, hq, hkv, rank5=True, d=64, length=16):
    torch.manual_seed(0)
    m = nn.Sequential(Attn(d, hq, hkv, rank5), Attn(d, hq, hkv, rank5))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(2, length, d)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as p:
        for _ in range(2):
            m(x).sum().backward()
            opt.step()
            opt.zero_grad()
            p.step()
    p.export_chrome_trace(str(path))
    return path


def _walk_expands(path):
    """Walker: the K/V head counts that the trace's aten::expand events repeat ([.., H, 1, L, D] to
    [.., H, r, L, D], or [.., 1, L, D] to [.., Hq, L, D]), with how often each was seen."""
    seen = {}
    for e in json.load(open(path))["traceEvents"]:
        if e.get("name") != "aten::expand" or e.get("cat") != "cpu_op":
            continue
        x, size = e["args"]["Input Dims"][0], json.loads(e["args"]["Concrete Inputs"][1])
        if len(x) == 5 and x[2] == 1 and size[2] > 1:
            seen[x[1]] = seen.get(x[1], 0) + 1
        elif len(x) == 4 and x[1] == 1 and size[1] > 1:
            seen[1] = seen.get(1, 0) + 1
    return seen


@pytest.mark.parametrize("hq,hkv,rank5,heads", [(8, 2, True, "GQA"), (8, 1, True, "MQA"), (8, 1, False, "MQA")])
def test_bare_expand_names_gqa_and_kv_heads(tmp_path, hq, hkv, rank5, heads):
    path = _record(tmp_path / "t.json", hq, hkv, rank5)
    assert _walk_expands(path) == {hkv: 2 * 2 * 2}  # K and V, 2 layers, 2 steps
    r = analyze_file(str(path))
    assert r["calls"] == 4
    for lay in r["layers"]:
        assert lay.heads == heads
        assert lay.shape.q_heads == hq and lay.shape.kv_heads == hkv


def test_mha_with_a_square_mask_expand_stays_mha(tmp_path):
    """A mask expanded [B, 1, L, L] -> [B, H, L, L] with L = D has K's shape: one expand is not K and V."""
    torch.manual_seed(0)
    b, h, l, d = 2, 4, 8, 8
    q, k, v = (torch.randn(b, h, l, d) for _ in range(3))
    mask = torch.zeros(b, 1, l, l)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as p:
        for _ in range(2):
            s = q @ k.transpose(-1, -2) / d ** 0.5 + mask.expand(b, h, l, l)
            torch.softmax(s, -1) @ v
    path = tmp_path / "mha.json"
    p.export_chrome_trace(str(path))
    r = analyze_file(str(path))
    assert r["calls"] == 2
    assert all(lay.heads == "MHA" and lay.shape.kv_heads == h for lay in r["layers"])
