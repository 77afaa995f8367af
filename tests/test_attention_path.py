"""Attention found by its path, not its name (issue 45): a matmul-like op that outputs the score
[.., Lq, Lk], reaching through scale, mask and a softmax (by name, or written out as max, sub, exp,
sum, div) a matmul-like op that contracts over Lk. Recorded here on the CPU with torch.profiler
(record_shapes, with_stack; 2 layers, 2 training steps): nn.MultiheadAttention's slow path with an
attn_mask, einsum attention in a module whose name says nothing, a softmax written out, and a
negative control (matmuls and a log-softmax loss, no attention). Each count is re-derived from the
raw events by a walker of this file.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tb_attn_plugin.attention import op_roles
from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.text import render

B, L, H, D = 2, 24, 4, 16

_RECORD = r'''
import sys, torch, torch.nn as nn, torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule
B, L, H, D = 2, 24, 4, 16
E = H * D
out = sys.argv[1]

class MHABlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(E, H, batch_first=True)  # need_weights=True by default: slow path
        self.ff = nn.Linear(E, E)
    def forward(self, x, mask):
        return self.ff(x + self.mha(x, x, x, attn_mask=mask)[0])

def softmax_by_hand(s):
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

class Mixer(nn.Module):  # a name that says nothing about attention
    def __init__(self, hand):
        super().__init__()
        self.qkv, self.o, self.hand = nn.Linear(E, 3 * E), nn.Linear(E, E), hand
    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, H, D).permute(2, 0, 3, 1, 4)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / D ** 0.5
        s = torch.where(mask, s, torch.finfo(s.dtype).min)
        p = softmax_by_hand(s) if self.hand else torch.softmax(s, -1)
        y = torch.einsum("bhqk,bhkd->bhqd", p, v)
        return self.o(y.transpose(1, 2).reshape(b, n, E))

class MQA(nn.Module):  # multi-query: K and V have one head, broadcast inside matmul
    def __init__(self, d=D):
        super().__init__()
        self.d = d
        self.q, self.kv, self.o = nn.Linear(H * d, H * d), nn.Linear(H * d, 2 * d), nn.Linear(H * d, H * d)
    def forward(self, x, mask=None):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, H, self.d).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, 1, self.d).permute(2, 0, 3, 1, 4)
        s = torch.matmul(q, k.transpose(-1, -2)) * self.d ** -0.5
        return self.o(torch.matmul(torch.softmax(s, -1), v).transpose(1, 2).reshape(b, n, H * self.d))

class GQA(nn.Module):  # grouped-query: K/V of 2 heads for Q's 4, repeated (repeat_interleave) or SDPA's enable_gqa
    def __init__(self, sdpa):
        super().__init__()
        self.sdpa = sdpa
        self.q, self.kv, self.o = nn.Linear(E, E), nn.Linear(E, 2 * 2 * D), nn.Linear(E, E)
    def forward(self, x, mask):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, H, D).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, 2, D).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        else:
            k, v = k.repeat_interleave(H // 2, dim=1), v.repeat_interleave(H // 2, dim=1)
            y = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * D ** -0.5, -1), v)
        return self.o(y.transpose(1, 2).reshape(b, n, E))

class SelfAttention(nn.Module):  # heads (and batch) in a Python loop: 2-D matmuls, a softmax each
    def __init__(self):
        super().__init__()
        self.qkv, self.o = nn.Linear(E, 3 * E), nn.Linear(E, E)
    def forward(self, x, mask):
        q, k, v = self.qkv(x).split(E, -1)
        rows = []
        for i in range(x.shape[0]):
            heads = []
            for h in range(H):
                sl = slice(h * D, (h + 1) * D)
                p = torch.softmax(q[i, :, sl] @ k[i, :, sl].T / D ** 0.5, -1)
                heads.append(p @ v[i, :, sl])
            rows.append(torch.cat(heads, -1))
        return self.o(torch.stack(rows))

class NoAttention(nn.Module):  # GEMMs, but no score path; the loss below is a log-softmax
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(E, E), nn.Linear(E, E)
    def forward(self, x, mask):
        return self.b(torch.relu(torch.matmul(x, self.a.weight.t())))

# multi-query attention with profile_memory and L = D: Q, K/V copies, outputs have the score's size
class MQAMemory(MQA):
    pass

torch.manual_seed(0)
mq = nn.Sequential(MQAMemory(32), MQAMemory(32))
xm = torch.randn(B, 32, H * 32)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True,
             schedule=schedule(wait=0, warmup=1, active=2),
             on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/mqa_memory.json")) as prof:
    for _ in range(3):
        mq(xm).sum().backward(); prof.step()

for mode in ("mha", "einsum", "hand", "mqa", "gqa_repeat", "gqa_sdpa", "per_head", "negative"):
    torch.manual_seed(0)
    make = {"mha": MHABlock, "einsum": lambda: Mixer(False), "hand": lambda: Mixer(True), "mqa": MQA,
            "gqa_repeat": lambda: GQA(False), "gqa_sdpa": lambda: GQA(True), "per_head": SelfAttention,
            "negative": NoAttention}[mode]
    layers = nn.ModuleList([make() for _ in range(2)])
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1) if mode == "mha" else torch.tril(torch.ones(L, L, dtype=torch.bool))
    head = nn.Linear(E, 10)
    opt = torch.optim.SGD(list(layers.parameters()) + list(head.parameters()), lr=0.01)
    x, y = torch.randn(B, L, E), torch.randint(0, 10, (B * L,))
    def step():
        h = x
        for m in layers:
            h = m(h, mask)
        loss = F.nll_loss(F.log_softmax(head(h).view(-1, 10), -1), y)
        opt.zero_grad(); loss.backward(); opt.step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True,
                 schedule=schedule(wait=0, warmup=1, active=2),
                 on_trace_ready=lambda p, mode=mode: p.export_chrome_trace(f"{out}/{mode}.json")) as prof:
        for _ in range(3):
            step(); prof.step()
'''


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("path")
    subprocess.run([sys.executable, "-c", _RECORD, str(out)], check=True, timeout=600, capture_output=True)
    return out


def report(traces, mode):
    return analyze_file(str(traces / f"{mode}.json"))


def forward_ops(path, name):
    """Walker: the events named ``name`` that run in forward (outside autograd's backward ranges)."""
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    bwd = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("autograd::engine::evaluate_function")]
    return [e for e in ev if e["name"] == name and not any(a <= e["ts"] <= b for a, b in bwd)]


def fwd_stages(r):
    return {s["stage"] for s in r["stages"] if s["pass"] == "fwd"}


def test_multihead_attention_slow_path_with_mask(traces):
    """F.multi_head_attention_forward: baddbmm(mask, q·scale, kᵀ) -> softmax -> bmm; baddbmm's first
    argument is the mask (its bias), not Q."""
    r = report(traces, "mha")
    bmm = forward_ops(traces / "mha.json", "aten::baddbmm")
    assert r["calls"] == len(bmm) == 4  # 2 layers x 2 steps
    assert {"qk_matmul", "softmax", "av_matmul"} <= fwd_stages(r)
    q, kt = bmm[0]["args"]["Input Dims"][1:3]  # [B·H, Lq, D], [B·H, D, Lk]
    shape = r["layers"][0].shape
    assert (shape.batch_heads, shape.q_len, shape.k_len, shape.head_dim) == (q[0], q[1], kt[2], q[2])
    assert "  found: 4 by the score path (QKᵀ → softmax → AV by shapes; names only as evidence)" in render(r).splitlines()


def test_einsum_attention_without_attention_names(traces):
    """einsum bhqd,bhkd->bhqk / √d -> where(mask) -> softmax -> einsum bhqk,bhkd->bhqd in a module
    called Mixer: the equation is not recorded, the bmm each einsum lowers to says what it contracts."""
    r = report(traces, "einsum")
    assert r["calls"] == len(forward_ops(traces / "einsum.json", "aten::softmax")) == 4
    assert len(forward_ops(traces / "einsum.json", "aten::einsum")) == 2 * r["calls"]
    assert {"qk_matmul", "scale_mask", "softmax", "av_matmul"} <= fwd_stages(r)
    assert r["layers"][0].shape.q_len == L and r["layers"][0].shape.head_dim == D


def test_softmax_written_out(traces):
    """x - max, exp, / sum between the two einsums: a softmax by what it does."""
    r = report(traces, "hand")
    assert forward_ops(traces / "hand.json", "aten::softmax") == []
    assert r["calls"] == len(forward_ops(traces / "hand.json", "aten::exp")) == 4
    assert {"qk_matmul", "softmax", "av_matmul"} <= fwd_stages(r)
    softmax_cpu = sum(s["cpu_us"] for s in r["stages"] if s["stage"] == "softmax" and s["pass"] == "fwd")
    assert softmax_cpu > 0


def test_heads_in_a_python_loop(traces):
    """2-D matmuls, one softmax per head and batch element, inside an attention module: one call per
    module invocation, each matmul staged by the softmax beside it."""
    r = report(traces, "per_head")
    scopes = forward_ops(traces / "per_head.json", "nn.Module: SelfAttention_0") + \
        forward_ops(traces / "per_head.json", "nn.Module: SelfAttention_1")
    assert r["calls"] == len(scopes) == 4
    assert len(forward_ops(traces / "per_head.json", "aten::softmax")) == 4 * B * H
    assert {"qk_matmul", "softmax", "av_matmul"} <= fwd_stages(r)


def test_no_attention_no_call(traces):
    """GEMMs, a relu and a log-softmax loss: no score path, no call."""
    r = report(traces, "negative")
    assert forward_ops(traces / "negative.json", "aten::log_softmax")
    assert r["calls"] == 0


def test_op_roles_rows_read_their_examples():
    """Each row of the op-role table computes a product from its own recorded example."""
    for row in op_roles.OP_ROLES:
        dims = json.loads(row.example)
        if row.left < 0:  # einsum: the equation, when recorded, says what is contracted
            p = op_roles.product(row.op, dims, ["bhqd,bhkd->bhqk", "", ""])
            assert (p.m, p.k, p.n, p.out) == (24, 16, 24, (2, 4, 24, 24)), row.op
            assert op_roles.product(row.op, dims, ["", "", ""]) is None
            continue
        p = op_roles.product(row.op, dims)
        assert p is not None and p.k == dims[row.left][-1] == dims[row.right][-2], row.op
        assert row.source


def test_einsum_equation_names_the_contracted_index():
    pv = op_roles.product("aten::einsum", [[], [[2, 4, 24, 24], [2, 4, 24, 16]], []], ["bhqk,bhkd->bhqd"])
    assert (pv.m, pv.k, pv.n) == (24, 24, 16)
    assert op_roles.parse_equation("bhqd,bhkd->bhqk") == ("bhqd", "bhkd", "bhqk")
    assert op_roles.parse_equation("ij,jk,kl->il") is None
    assert op_roles.parse_equation("bhqd,bhkd") is None


def test_multi_query_attention_is_named(traces):
    """K and V of one head, broadcast inside matmul: the QKᵀ matmul's recorded K has 1 head."""
    r = report(traces, "mqa")
    mm = forward_ops(traces / "mqa.json", "aten::matmul")
    q, kt = mm[0]["args"]["Input Dims"][:2] if len(mm[0]["args"]["Input Dims"][0]) == 4 else mm[1]["args"]["Input Dims"][:2]
    assert r["calls"] == 4
    for lay in r["layers"]:
        assert lay.heads == "MQA" and (lay.shape.q_heads, lay.shape.kv_heads) == (q[1], kt[1]) == (H, 1)
    assert all(lay.heads == "MHA" for lay in report(traces, "einsum")["layers"])


def test_grouped_query_attention_is_named(traces):
    """K/V of 2 heads for Q's 4: repeated with repeat_interleave before the matmuls (which then see 4
    heads; the aten::expand inside repeat_interleave shows K/V's own 2, heads.py), or passed to SDPA
    with enable_gqa (its K has 2 heads)."""
    rep = forward_ops(traces / "gqa_repeat.json", "aten::repeat_interleave")
    r = report(traces, "gqa_repeat")
    assert r["calls"] == 4 and len(rep) == 2 * r["calls"]
    kv = rep[0]["args"]["Input Dims"][0][1]
    for lay in r["layers"]:
        assert lay.heads == "GQA" and lay.shape.q_heads == H and lay.shape.kv_heads == kv == 2
    sdpa = forward_ops(traces / "gqa_sdpa.json", "aten::scaled_dot_product_attention")
    r = report(traces, "gqa_sdpa")
    assert r["calls"] == len(sdpa) == 4
    k = sdpa[0]["args"]["Input Dims"][1]
    for lay in r["layers"]:
        assert lay.heads == "GQA" and (lay.shape.q_heads, lay.shape.kv_heads) == (H, k[1]) == (H, 2)


def _score_allocations(path, score):
    """Walker: the allocations of ``score`` bytes made by the score path, from the raw events: in
    forward inside the QKᵀ matmul (the first aten::matmul of each MQAMemory scope, not its input
    copies), the scale's aten::mul or the softmax; in backward inside the scale's and the softmax's
    autograd nodes (MulBackward0, SoftmaxBackward0). And every allocation of that size."""
    ev = json.load(open(path))["traceEvents"]
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "python_function", "user_annotation")]
    mem = [e for e in ev if e.get("name") == "[memory]" and e["args"].get("Bytes") == score]

    def inside(e, t):
        return e["ts"] <= t <= e["ts"] + e["dur"]

    windows = []
    for m in [e for e in ops if e["name"].startswith("nn.Module: MQAMemory")]:
        outer = sorted((e for e in ops if e.get("cat") == "cpu_op" and inside(m, e["ts"]) and e["ts"] > m["ts"]),
                       key=lambda e: e["ts"])
        top = [e for e in outer if not any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
                                           for o in outer)]
        qk = next(e for e in top if e["name"] == "aten::matmul")
        windows.append(("qk", qk))
        windows += [("path", e) for e in top if e["name"] in ("aten::mul", "aten::softmax")]
    windows += [("path", e) for e in ops if e["name"].endswith((": MulBackward0", ": SoftmaxBackward0"))]
    copies = [e for e in ops if e["name"] in ("aten::clone", "aten::contiguous", "aten::copy_", "aten::reshape")]
    hits = 0
    for a in mem:
        t = a["ts"]
        for kind, w in windows:
            if inside(w, t) and not (kind == "qk" and any(inside(c, t) and inside(w, c["ts"]) for c in copies)):
                hits += 1
                break
    return hits, len(mem)


def test_score_blocks_are_made_by_score_path_ops(traces):
    """L = D: Q, K/V copies, AV outputs and projections have the score's size; only the QKᵀ output,
    the scale, the softmax and their backward are score blocks."""
    r = report(traces, "mqa_memory")
    score = B * H * 32 * 32 * 4
    hits, same_size = _score_allocations(traces / "mqa_memory.json", score)
    sm = r["memory"]["score_matrix"]
    assert sm["blocks"] == hits == 5 * r["calls"]  # QKᵀ, scale, softmax; scale and softmax backward
    assert same_size > hits
    assert sm["bytes_total"] == hits * score
    assert not [s for s in r["memory"]["stages"] if s["score_matrix_blocks"]
                and (s["stage"], s["pass"]) in {("qkv_proj", "fwd"), ("out_proj", "fwd"), ("av_matmul", "fwd"),
                                                 ("av_matmul", "bwd"), ("qk_matmul", "bwd")}]
