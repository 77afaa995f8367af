"""Small attention models profiled on the CPU with plain torch.profiler (no collector), so the
engine is tested on what any user's trace looks like."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tb_attn_plugin.format import tags

STEPS = 2  # active profiler steps per trace
LAYERS = 2
D, HEADS, L, B = 64, 4, 32, 2


class Attn(nn.Module):
    def __init__(self, mode: str):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.mode = mode
        self.path = ""

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        if self.mode == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.mode == "math":
            with sdpa_kernel(SDPBackend.MATH):
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        elif self.mode == "tagged":  # a user-marked region with stage marks, as the collector writes them
            with record_function(tags.call_name(layer=self.path, impl="user", b=b, hq=HEADS, hkv=HEADS, lq=n, lk=n,
                                                d=d // HEADS, dtype="float32", causal=False)):
                with record_function(tags.stage_name("qk")):
                    a = torch.einsum("bhqd,bhkd->bhqk", q, k) * (d // HEADS) ** -0.5
                with record_function(tags.stage_name("softmax")):
                    a = torch.exp(a - a.amax(-1, keepdim=True))
                    a = a / a.sum(-1, keepdim=True)
                with record_function(tags.stage_name("av")):
                    y = torch.einsum("bhqk,bhkd->bhqd", a, v)
        else:  # hand-written, as in Hugging Face "eager"
            a = (q @ k.transpose(-1, -2)) / (d // HEADS) ** 0.5
            a = a.softmax(-1)
            a = F.dropout(a, 0.1, training=True)
            y = a @ v
        return self.o(y.transpose(1, 2).reshape(b, n, d))


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0]


def model(mode: str) -> nn.Module:
    if mode == "mha":
        return nn.Sequential(*[MHA() for _ in range(LAYERS)])
    m = nn.Sequential(*[Attn(mode) for _ in range(LAYERS)])
    for i, layer in enumerate(m):
        layer.path = f"blocks.{i}.attn"
    return m


def record(mode: str, out: Path) -> Path:
    torch.manual_seed(0)
    m = model(mode)
    x = torch.randn(B, L, D)
    path = out / f"{mode}.pt.trace.json"
    sched = schedule(wait=0, warmup=1, active=STEPS, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, profile_memory=True, schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(1 + STEPS):
            m(x).sum().backward()
            prof.step()
    return path


def record_all(out: Path) -> dict[str, Path]:
    return {mode: record(mode, out) for mode in ("sdpa", "math", "eager", "mha", "tagged")}


def record_steps(mode: str, path: Path, steps: int, seq: int = L) -> Path:
    """``steps`` profiler steps (after one warm-up step) of the ``mode`` model at sequence length
    ``seq``, forward and backward, to ``path``: the per-step samples compare's noise test needs."""
    torch.manual_seed(0)
    torch.set_num_threads(1)  # two recordings at once on a small machine: no intra-op threads spinning on each other
    m = model(mode)
    x = torch.randn(B, seq, D)
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(1 + steps):
            m(x).sum().backward()
            prof.step()
    return path


if __name__ == "__main__":  # python -m tests.cpu_models MODE PATH STEPS SEQ (compare's noise tests record two at once)
    import sys

    record_steps(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))


def record_training_loop(path) -> Path:
    """Three profiled steps of a small encoder layer fed by a DataLoader and stepped by SGD, on the CPU
    (the step overview's host side: data loading and the optimizer); the trace is written to ``path``."""
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 16, 32), torch.randn(64, 16, 32))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for x, y in loader:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    return Path(path)
