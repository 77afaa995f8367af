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


def llama(*, heads, head_dim, kv_heads, dtype, device, causal):
    """A Hugging Face LlamaAttention layer (its q/k/v/o projections and rotary embedding included),
    with the attention implementation that the config names ("sdpa")."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      head_dim=head_dim, max_position_embeddings=65536, attn_implementation="sdpa")
    layer = LlamaAttention(cfg, layer_idx=0).to(device=device, dtype=dtype)
    rope = LlamaRotaryEmbedding(config=cfg).to(device)

    def make_inputs(batch, seq_len):
        x = torch.randn(batch, seq_len, heads * head_dim, device=device, dtype=dtype)
        pos = torch.arange(seq_len, device=device).unsqueeze(0).expand(batch, -1)
        cos, sin = rope(x, pos)
        mask = None
        if causal:
            mask = torch.full((seq_len, seq_len), float("-inf"), device=device, dtype=dtype).triu(1)[None, None]
        return {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": mask}

    return layer, make_inputs
