"""A small pre-norm transformer whose attention can be switched between the variants users compare,
and a tiny Llama built from a config (no download) when transformers is installed."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DIM, HEADS, LAYERS, VOCAB = 128, 4, 2, 256
# SDPA with one backend forced, as users pin it with torch.nn.attention.sdpa_kernel.
FORCED = {"sdpa-math": SDPBackend.MATH, "sdpa-flash": SDPBackend.FLASH_ATTENTION,
          "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION}
_flex_cache: dict = {}


def _flex(q, k, v):
    """Causal FlexAttention, compiled as users run it (eager flex is a slow reference path)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    n, dev = q.shape[-2], q.device
    if "fn" not in _flex_cache:
        _flex_cache["fn"] = torch.compile(flex_attention, dynamic=False)
    key = (n, str(dev))
    if key not in _flex_cache:
        _flex_cache[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, n, n, device=dev)
    return _flex_cache["fn"](q, k, v, block_mask=_flex_cache[key])


class Attention(nn.Module):
    def __init__(self, impl: str):
        super().__init__()
        self.qkv, self.out, self.impl = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM), impl

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        if self.impl == "eager":  # hand-written: the B*H*L*L score matrix is materialised
            mask = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
            a = (q @ k.transpose(-1, -2)) * (DIM // HEADS) ** -0.5
            y = a.masked_fill(mask, float("-inf")).softmax(-1) @ v
        elif self.impl in FORCED:
            with sdpa_kernel(FORCED[self.impl]):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.impl == "flex":
            y = _flex(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, DIM))


class Block(nn.Module):
    def __init__(self, impl: str):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(DIM), Attention(impl), nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, impl: str):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block(impl) for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def loss_fn(model, ids):
    logits = model(ids)
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def tiny_llama(impl: str):
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=DIM, intermediate_size=4 * DIM,
                                   num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS // 2,
                                   max_position_embeddings=4096, attn_implementation=impl)
    return transformers.LlamaForCausalLM(cfg)


def hf_loss_fn(model, ids):
    return model(input_ids=ids, labels=ids).loss
