"""The fields of one attention call (tags.CALL_FIELDS), read from the tensors and arguments it got.

Only metadata is read (shapes, dtype, flags): nothing here touches tensor data or synchronises a device.
"""

from __future__ import annotations

from typing import Any

import torch

# torch._fused_sdp_choice returns an SDPBackend value; names as the engine spells backends.
_BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn", 4: "overrideable"}


def sdpa_backend(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False) -> str | None:
    """The backend the dispatcher picks for these arguments (honours sdpa_kernel/backends toggles).
    On the CPU the fused choice is the CPU flash kernel, which the engine calls ``flash_cpu``."""
    try:
        choice = int(torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa))
    except Exception:  # private API, or inputs SDPA itself will reject: leave the field out, never fail the call
        return None
    name = _BACKENDS.get(choice)
    if name == "flash" and q.device.type == "cpu":
        return "flash_cpu"
    return name


def enabled_sdp() -> str | None:
    """The SDPA backends enabled now (SDP_BACKENDS order, comma-separated; 'none'): what ``sdpa_kernel`` or
    ``torch.backends.cuda.enable_*_sdp`` left switched on. These global switches gate the CPU's flash kernel
    too (sdp_utils_cpp.h check_runtime_disabled_flash). About 0.3 µs per call."""
    b = torch.backends.cuda
    try:
        on = [name for name, f in (("flash", b.flash_sdp_enabled), ("efficient", b.mem_efficient_sdp_enabled),
                                   ("cudnn", b.cudnn_sdp_enabled), ("math", b.math_sdp_enabled)) if f()]
    except Exception:  # a torch without one of the switches: leave the field out
        return None
    return ",".join(on) or "none"


def mask_kind(attn_mask, is_causal: bool) -> str:
    if attn_mask is None:
        return "causal" if is_causal else "none"
    if not isinstance(attn_mask, torch.Tensor):  # e.g. a block mask object
        return type(attn_mask).__name__
    return "bool" if attn_mask.dtype == torch.bool else "additive"


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def bhld(q: torch.Tensor, k: torch.Tensor) -> dict[str, Any]:
    """Shape fields of (..., heads, len, dim) tensors; a 3-D input has no head dim (one head)."""
    if q.dim() < 3 or k.dim() < 3:
        return {"lq": q.shape[-2] if q.dim() >= 2 else None, "d": q.shape[-1] if q.dim() else None}
    b = 1
    for s in q.shape[:-3]:
        b *= int(s)
    if q.dim() == 3:
        return {"b": int(q.shape[0]), "hq": 1, "hkv": 1, "lq": int(q.shape[1]), "lk": int(k.shape[-2]), "d": int(q.shape[2])}
    return {"b": b, "hq": int(q.shape[-3]), "hkv": int(k.shape[-3]), "lq": int(q.shape[-2]), "lk": int(k.shape[-2]),
            "d": int(q.shape[-1])}


def sdpa_fields(args: tuple, kwargs: dict) -> dict[str, Any]:
    """Fields of an F.scaled_dot_product_attention call, from its arguments as the caller passed them."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    a = dict(zip(names, args))
    a.update(kwargs)
    q, k, v = a.get("query"), a.get("key"), a.get("value")
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return {}
    mask, p = a.get("attn_mask"), float(a.get("dropout_p") or 0.0)
    causal, scale, gqa = bool(a.get("is_causal", False)), a.get("scale"), bool(a.get("enable_gqa", False))
    out = bhld(q, k)
    out.update(dtype=dtype_name(q), causal=causal, mask=mask_kind(mask, causal), dropout=p, scale=scale,
               gqa=gqa or (out.get("hq") is not None and out.get("hq") != out.get("hkv")))
    out["backend"] = sdpa_backend(q, k, v, mask, p, causal, scale, gqa)
    out["sdp"] = enabled_sdp()
    return out


def flex_fields(args: tuple, kwargs: dict) -> dict[str, Any]:
    names = ("query", "key", "value", "score_mod", "block_mask", "scale", "enable_gqa")
    a = dict(zip(names, args))
    a.update(kwargs)
    q, k = a.get("query"), a.get("key")
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
        return {}
    out = bhld(q, k)
    mask = "block" if a.get("block_mask") is not None else ("score_mod" if a.get("score_mod") is not None else "none")
    out.update(dtype=dtype_name(q), mask=mask, scale=a.get("scale"), dropout=0.0, backend="flex",
               gqa=bool(a.get("enable_gqa")) or out.get("hq") != out.get("hkv"))
    return out


def mha_fields(m: torch.nn.MultiheadAttention, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Fields of an nn.MultiheadAttention call, from its inputs (query, key, value, ...)."""
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights",
             "is_causal")
    a = dict(zip(names, args))
    a.update(kwargs)
    q, k = a.get("query"), a.get("key")
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor):
        return {}
    batched = q.dim() == 3
    if batched and m.batch_first:
        b, lq, lk = q.shape[0], q.shape[1], k.shape[1]
    elif batched:
        b, lq, lk = q.shape[1], q.shape[0], k.shape[0]
    else:
        b, lq, lk = 1, q.shape[0], k.shape[0]
    causal = bool(a.get("is_causal", False))
    mask = a.get("attn_mask")
    if mask is None and a.get("key_padding_mask") is not None:
        mask = a["key_padding_mask"]
    return {"b": int(b), "hq": m.num_heads, "hkv": m.num_heads, "lq": int(lq), "lk": int(lk), "d": m.head_dim,
            "dtype": dtype_name(q), "causal": causal, "mask": mask_kind(mask, causal),
            "dropout": float(m.dropout if m.training else 0.0), "gqa": False,
            "need_weights": bool(a.get("need_weights", True))}  # MultiheadAttention.forward's default


def hf_fields(m: torch.nn.Module, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Fields of a Hugging Face attention module's call, from its config and hidden_states (b, len, hidden).
    Key length equals query length unless a KV cache is passed (then it is left out)."""
    x = kwargs.get("hidden_states", args[0] if args else None)
    cfg = getattr(m, "config", None)
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or cfg is None:
        return {}
    hq = getattr(cfg, "num_attention_heads", None)
    hkv = getattr(cfg, "num_key_value_heads", None) or hq
    d = getattr(m, "head_dim", None) or (x.shape[-1] // hq if hq else None)
    cached = kwargs.get("past_key_values", kwargs.get("past_key_value")) is not None
    p = float(getattr(m, "attention_dropout", 0.0) or 0.0) if m.training else 0.0
    causal = bool(getattr(m, "is_causal", False))
    return {"b": int(x.shape[0]), "hq": hq, "hkv": hkv, "lq": int(x.shape[1]), "lk": None if cached else int(x.shape[1]),
            "d": d, "dtype": dtype_name(x), "causal": causal, "dropout": p, "scale": getattr(m, "scaling", None),
            "mask": mask_kind(kwargs.get("attention_mask"), causal),
            "gqa": hq is not None and hkv != hq}
