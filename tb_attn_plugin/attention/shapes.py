"""Shape, dtype and flags of an attention call, read from ``Input Dims``/``Input type``/``Concrete Inputs``.

Argument positions follow the ATen signatures (native_functions.yaml); a trace without
``record_shapes`` simply yields no shape.
"""

from __future__ import annotations

from typing import Any

# op -> (layout of q/k, index of attn_mask, index of dropout_p, index of is_causal)
SIGNATURES: dict[str, tuple[str, int | None, int | None, int | None]] = {
    "aten::scaled_dot_product_attention": ("BHLD", 3, 4, 5),
    "aten::_scaled_dot_product_flash_attention": ("BHLD", None, 3, 4),
    "aten::_scaled_dot_product_efficient_attention": ("BHLD", 3, 5, 6),
    "aten::_scaled_dot_product_cudnn_attention": ("BHLD", 3, 5, 6),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("BHLD", 5, 3, 4),
    "aten::_scaled_dot_product_attention_math": ("BHLD", 3, 4, 5),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("BHLD", 3, 4, 5),
    "aten::_flash_attention_forward": ("BLHD", None, 7, 8),
    "aten::_efficient_attention_forward": ("BLHD", 3, None, None),
}
VENDOR_LAYOUT = "BLHD"  # flash-attn convention, used by aiter/vLLM/flash_attn ops

DTYPES = {
    "float": ("float32", 4), "double": ("float64", 8), "c10::Half": ("float16", 2), "c10::BFloat16": ("bfloat16", 2),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1), "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "int": ("int32", 4), "long int": ("int64", 8),
}
ITEMSIZE = {v[0]: v[1] for v in DTYPES.values()} | {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# A dimension past 2^40 is no real tensor's (a trace is untrusted text): such a shape is unknown,
# so FLOPs and bytes computed from it stay finite floats instead of overflowing.
MAX_DIM = 1 << 40


def plausible_dim(x: Any) -> bool:
    return type(x) is int and 0 <= x < MAX_DIM


def dtype_of(types: list[Any] | None) -> str | None:
    if not types:
        return None
    t = types[0]
    return DTYPES.get(t, (t, 0))[0] if isinstance(t, str) and t else None


def _flag(concrete: list[Any] | None, i: int | None) -> str | None:
    if concrete is None or i is None or i >= len(concrete):
        return None
    v = concrete[i]
    return v if isinstance(v, str) and v != "" else None


def shape_at(dims: Any, i: int, min_rank: int = 1) -> tuple[list[int] | None, str | None]:
    """The i-th entry of an op's ``Input Dims`` when it is a shape a tensor can have: ``(shape, None)``;
    ``(None, None)`` when it is not recorded (absent, empty, not a tensor); ``(None, why)`` when it is bent
    (a dimension that is no int, negative, past 2^40, or fewer than ``min_rank`` dimensions).
    Every reader of ``Input Dims`` goes through here, so no reader indexes an unchecked shape."""
    if not isinstance(dims, list) or i >= len(dims):
        return None, None
    d = dims[i]
    if not isinstance(d, list) or not d:
        return None, None  # a scalar, None or an empty list: not a recorded tensor
    if not all(plausible_dim(x) for x in d):
        return None, f"a shape no tensor has ({_short(d)})"
    if len(d) < min_rank:
        return None, f"{len(d)} dimension{'' if len(d) == 1 else 's'} ({_short(d)}) where at least {min_rank} are needed"
    return d, None


def _short(v: Any) -> str:
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _dims(dims: list[Any] | None, i: int) -> list[int] | None:
    return shape_at(dims, i)[0]


SDPA_NAMES = ("query", "key", "value")


def sdpa_qkv(dims: Any) -> tuple[list[list[int]] | None, str | None]:
    """q, k, v of an SDPA-signature op, each (..., L, E); 4-D ones (B, H, L, E) with B and H at least 1.
    ``(None, None)``: not recorded; ``(None, why)``: recorded bent, so what reads them must say unknown."""
    out = []
    for i, name in enumerate(SDPA_NAMES):
        d, why = shape_at(dims, i, min_rank=2)
        if why:
            return None, f"{name}: {why}"
        if d is None:
            return None, None
        out.append(d)
    if all(len(d) == 4 for d in out):
        for d, name in zip(out, SDPA_NAMES):
            if d[0] < 1 or d[1] < 1:
                return None, f"{name}: {'batch' if d[0] < 1 else 'heads'} 0 ({_short(d)})"
    return out, None


def make_shape(b, hq, hkv, lq, lk, d) -> dict[str, int | None]:
    bh = b * hq if isinstance(b, int) and isinstance(hq, int) else None
    return {"batch": b, "q_heads": hq, "kv_heads": hkv, "q_len": lq, "k_len": lk, "head_dim": d, "batch_heads": bh}


def from_attention_op(name: str, dims, types, concrete) -> dict[str, Any]:
    """Shape and flags of a fused/SDPA op; keys absent when the trace lacks them."""
    layout, mask_i, drop_i, causal_i = SIGNATURES.get(name, (VENDOR_LAYOUT, None, None, None))
    out: dict[str, Any] = {}
    q, k = _dims(dims, 0), _dims(dims, 1)
    if q and k and len(q) == 4 and len(k) == 4:
        if layout == "BHLD":
            out["shape"] = make_shape(q[0], q[1], k[1], q[2], k[2], q[3])
        else:
            out["shape"] = make_shape(q[0], q[2], k[2], q[1], k[1], q[3])
    elif q and k and len(q) == 3 and len(k) == 3 and layout == "BLHD":
        # varlen flash-attn: (total_tokens, heads, dim); lengths are not recoverable
        out["shape"] = make_shape(None, q[1], k[1], q[0], k[0], q[2])
    dt = dtype_of(types)
    if dt:
        out["dtype"] = dt
    c = _flag(concrete, causal_i)
    if c is not None:
        out["causal"] = c == "True"
    p = _flag(concrete, drop_i)
    if p is not None:
        try:
            drop = float(p)
        except ValueError:
            drop = None
        if drop is not None and 0.0 <= drop <= 1.0:  # a probability; NaN and "inf" are no dropout anyone ran
            out["dropout"] = drop
    if mask_i is not None and dims is not None:
        m = _dims(dims, mask_i)
        out["mask"] = "tensor" if m else "none"
    return out


def from_matmuls(qk_dims, softmax_dims, types) -> dict[str, Any]:
    """Shape of hand-written attention from its QK^T matmul (q: [..., Lq, D], k^T: [..., D, Lk])."""
    out: dict[str, Any] = {}
    a, b = _dims(qk_dims, 0), _dims(qk_dims, 1)
    if a and b and len(a) >= 3 and len(b) >= 3:
        lq, d, lk = a[-2], a[-1], b[-1]
        s = _dims(softmax_dims, 0)
        if len(a) == 4:
            out["shape"] = make_shape(a[0], a[1], b[1], lq, lk, d)
        elif s and len(s) == 4 and len(a) == 3 and s[0] * s[1] == a[0] and s[-2:] == [lq, lk]:
            out["shape"] = make_shape(s[0], s[1], s[1], lq, lk, d)  # (B·H, L, D) matmul, (B, H, Lq, Lk) softmax
        else:
            shape = make_shape(None, None, None, lq, lk, d)
            shape["batch_heads"] = a[0]
            out["shape"] = shape
    elif softmax_dims:
        s = _dims(softmax_dims, 0)
        if s and len(s) >= 3:
            shape = make_shape(s[0] if len(s) == 4 else None, s[1] if len(s) == 4 else None, None, s[-2], s[-1], None)
            shape["batch_heads"] = s[0] * s[1] if len(s) == 4 else s[0]
            out["shape"] = shape
    dt = dtype_of(types)
    if dt:
        out["dtype"] = dt
    return out


def from_tag(tag: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if any(tag.get(k) is not None and not plausible_dim(tag[k]) for k in ("b", "hq", "hkv", "lq", "lk", "d")):
        return out  # a shape no tensor has: unknown, not a number to multiply
    if tag.get("lq") is not None:
        out["shape"] = make_shape(tag.get("b"), tag.get("hq"), tag.get("hkv"), tag.get("lq"), tag.get("lk"), tag.get("d"))
    for key, field in (("dtype", "dtype"), ("causal", "causal"), ("dropout", "dropout"), ("mask", "mask")):
        if tag.get(key) is not None:
            out[field] = tag[key]
    return out


def flops(shape: dict[str, Any] | None, causal: bool | None) -> float | None:
    """Forward FLOPs of one call: 4·B·H·Lq·Lk·D (two matmuls), halved when causal."""
    if not shape:
        return None
    bh, lq, lk, d = shape.get("batch_heads"), shape.get("q_len"), shape.get("k_len"), shape.get("head_dim")
    if not all(plausible_dim(x) for x in (bh, lq, lk, d)):
        return None
    f = 4.0 * bh * lq * lk * d  # at most 2^162: a finite float
    return f / 2 if causal else f


def score_bytes(shape: dict[str, Any] | None, dtype: str | None) -> int | None:
    """Bytes of the B·H·Lq·Lk score matrix that unfused attention materialises."""
    if not shape:
        return None
    bh, lq, lk = shape.get("batch_heads"), shape.get("q_len"), shape.get("k_len")
    if not all(plausible_dim(x) for x in (bh, lq, lk)):
        return None
    return bh * lq * lk * ITEMSIZE.get(dtype or "float32", 4)
