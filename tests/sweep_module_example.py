"""A user's own attention for ``tb-attn sweep --module tests.sweep_module_example:mha``: torch's
nn.MultiheadAttention over (batch, seq_len, heads * head_dim) inputs."""

import torch


def mha(*, heads, head_dim, kv_heads, dtype, device, causal):
    embed = heads * head_dim
    layer = torch.nn.MultiheadAttention(embed, heads, batch_first=True, device=device, dtype=dtype)

    def make_inputs(batch, seq_len):
        x = torch.randn(batch, seq_len, embed, device=device, dtype=dtype)
        return {"query": x, "key": x, "value": x, "need_weights": False}

    return layer, make_inputs


not_a_factory = 42
