"""Why SDPA did not (or would not) pick a fused CUDA backend: PyTorch's eligibility checks
(eligibility_rules.py) replayed on the inputs an ``aten::scaled_dot_product_attention`` op recorded."""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from ..attention.shapes import DTYPES, sdpa_qkv, shape_at
from ..format.tags import SDP_BACKENDS
from .eligibility_rules import BACKENDS, CHECKS, CPU_BACKENDS, CPU_CHECKS, TORCH_SOURCE, UNANSWERABLE

SDPA_OP = "aten::scaled_dot_product_attention"  # (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
ASSUMED_ARCH = (8, 0)  # a trace without a GPU is judged for an sm80 device, and says so


class Inputs(msgspec.Struct):
    dims: list[list[int] | None]  # q, k, v
    dtypes: list[str | None]
    mask_dims: list[int] | None  # None: no mask
    mask_known: bool
    dropout: float | None
    causal: bool | None
    enable_gqa: bool | None
    training: bool | None
    cc: tuple[int, int] | None
    vendor: str | None
    strides: list[list[int] | None] | None = None  # q, k, v, mask; None: not recorded
    enabled: frozenset[str] | None = None  # SDPA backends switched on at the call (collector tag ``sdp``); None: not recorded


def _dtype(t: Any) -> str | None:
    return DTYPES.get(t, (t, 0))[0] if isinstance(t, str) and t else None


def _list(v: Any) -> list[int] | None:
    return v if isinstance(v, list) and all(isinstance(x, int) for x in v) else None


def enabled_of(sdp: Any) -> frozenset[str] | None:
    """The collector's ``sdp`` tag field ('math', 'flash,math', 'none') as a set; None when absent or unreadable."""
    if not isinstance(sdp, str) or not sdp:
        return None
    names = frozenset() if sdp == "none" else frozenset(sdp.split(","))
    return names if names <= set(SDP_BACKENDS) else None


def inputs_of(dims: list | None, types: list | None, concrete: list | None, training: bool | None,
              device: dict[str, Any] | None, strides: list | None = None,
              sdp: Any = None) -> tuple[Inputs | None, str | None]:
    """The inputs of one SDPA op from its recorded Input Dims / type / Strides / Concrete Inputs (and the
    collector's ``sdp`` tag field: the backends enabled at the call): ``(inputs, None)``; ``(None, None)``
    without dims; ``(None, why)`` when the dims are no tensor's."""
    d, why = sdpa_qkv(dims)
    if d is None:
        return None, why
    types = types or []
    concrete = concrete or []

    def flag(i: int) -> str | None:
        v = concrete[i] if i < len(concrete) else None
        return v if isinstance(v, str) and v else None

    mask, mask_bent = shape_at(dims, 3)
    drop = flag(4)
    try:
        dropout = float(drop) if drop is not None else None
    except ValueError:
        dropout = None
    causal, gqa = flag(5), flag(7)
    cc = None
    vendor = device.get("vendor") if device else None
    if device and device.get("compute_capability"):
        try:
            major, _, minor = str(device["compute_capability"]).partition(".")
            cc = (int(major), int(minor or 0))
        except ValueError:
            cc = None
    return Inputs(dims=d, dtypes=[_dtype(types[i]) if i < len(types) else None for i in range(3)],
                  mask_dims=mask, mask_known=len(dims) > 3 and not mask_bent, dropout=dropout,
                  causal=None if causal is None else causal == "True",
                  enable_gqa=None if gqa is None else gqa == "True", training=training, cc=cc, vendor=vendor,
                  strides=[_list(strides[i]) if i < len(strides) else None for i in range(4)]
                  if isinstance(strides, list) and len(strides) >= 3 else None, enabled=enabled_of(sdp)), None


# -- the predicates: True passes, False refuses (with the values its message needs), None cannot tell ------
Verdict = tuple[bool | None, dict[str, Any]]


def _arch(x: Inputs) -> tuple[int, int]:
    return x.cc or ASSUMED_ARCH


def _arch_text(x: Inputs) -> str:
    major, minor = _arch(x)
    return f"sm{major}{minor}" + ("" if x.cc else " (assumed: no GPU in the trace)")


def _four_d(x: Inputs) -> Verdict:
    nd = [len(v) for v in x.dims]
    return all(n == 4 for n in nd), {"ndims": "q %d-D, k %d-D, v %d-D" % tuple(nd)}


def _no_mask(x: Inputs) -> Verdict:
    if not x.mask_known:
        return None, {}
    return x.mask_dims is None, {"mask": f"shape {x.mask_dims}"}


def _hd(x: Inputs) -> dict[str, Any]:
    return {"dq": x.dims[0][-1], "dk": x.dims[1][-1], "dv": x.dims[2][-1]}


ROCM_MAX_HEAD_DIM = 512  # AOTriton >= 0.9 (aotriton_max_hdim in CUDA_FILE); older AOTriton and CUDA: 256


def _head_dim_flash(x: Inputs) -> Verdict:
    h = _hd(x)
    if not h["dq"] == h["dk"] == h["dv"]:
        return False, h
    if x.vendor == "AMD" and 256 < h["dq"] <= ROCM_MAX_HEAD_DIM:
        return None, h  # depends on the AOTriton version, which the trace does not record
    return h["dq"] <= 256, h


def _in_range(x: Inputs, lo: tuple[int, int], hi: tuple[int, int]) -> Verdict:
    if x.vendor == "AMD":
        return None, {}  # ROCm: AOTriton's own check_gpu decides at run time
    return lo <= _arch(x) <= hi, {"arch": _arch_text(x)}


def _grad_head_dim(x: Inputs) -> Verdict:
    a = _arch(x)
    if not ((8, 6) <= a <= (8, 9) or (12, 0) <= a <= (12, 1)):
        return True, {}
    if x.training is None:
        return None, {}
    d = x.dims[0][-1]
    ok = not x.training or d <= 192 or (not (x.dropout or 0) > 0 and d > 224)
    return ok, {"dq": d, "arch": _arch_text(x)}


def _causal_square(x: Inputs) -> Verdict:
    if x.causal is None:
        return None, {}
    lq, lk = x.dims[0][-2], x.dims[1][-2]
    return not x.causal or lq == lk, {"lq": lq, "lk": lk}


def _dtype_in(allowed: tuple[str, ...]) -> Callable[[Inputs], Verdict]:
    def check(x: Inputs) -> Verdict:
        q = x.dtypes[0]
        if q is None:
            return None, {}
        same = x.dtypes[1] in (None, q) and x.dtypes[2] in (None, q)
        return same and q in allowed, {"dtype": q if same else "/".join(str(t) for t in x.dtypes),
                                       "allowed": ", ".join(allowed)}
    return check


def _low_precision(x: Inputs) -> Verdict:
    return _dtype_in(("float16", "bfloat16") if _arch(x) >= (8, 0) else ("float16",))(x)


def _efficient_dtypes(x: Inputs) -> Verdict:
    return _dtype_in(("float16", "float32", "bfloat16") if _arch(x) >= (8, 0) else ("float16", "float32"))(x)


def _heads(gqa_supported: bool) -> Callable[[Inputs], Verdict]:
    def check(x: Inputs) -> Verdict:
        q, k, v = x.dims
        if q[0] != k[0] or q[0] != v[0]:
            return False, {"hq": q[-3], "hkv": k[-3], "gqa": f" and batch sizes differ ({q[0]}, {k[0]}, {v[0]})"}
        hq, hk, hv = q[-3], k[-3], v[-3]
        if gqa_supported and x.enable_gqa:
            return hk == hv and hq % hk == 0, {"hq": hq, "hkv": hk, "gqa": " with enable_gqa (not a multiple)"}
        if x.enable_gqa is None and hq != hk:
            return None, {}
        return hq == hk == hv, {"hq": hq, "hkv": hk, "gqa": " without enable_gqa"}
    return check


def _heads_cudnn(x: Inputs) -> Verdict:
    q, k, v = x.dims
    if q[0] != k[0] or q[0] != v[0]:
        return False, {"hq": q[-3], "hkv": k[-3]}
    return k[-3] == v[-3] and q[-3] % k[-3] == 0, {"hq": q[-3], "hkv": k[-3]}


def _last_dim_stride(ignore_singleton: bool) -> Callable[[Inputs], Verdict]:
    def check(x: Inputs) -> Verdict:
        st = x.strides
        if st is None or any(not s for s in st[:3]):
            return None, {}
        qkv = all(s[-1] == 1 for s in st[:3]) or (ignore_singleton and x.dims[0][-1] == 1)
        mask = x.mask_dims is None or not st[3] or st[3][-1] == 1
        got = ", ".join(f"{n} {s[-1]}" for n, s in zip(("q", "k", "v", "mask"), st) if s)
        return qkv and mask, {"strides": got}
    return check


def _nonzero(x: Inputs) -> Verdict:
    lq, lk = x.dims[0][-2], x.dims[1][-2]
    return lq > 0 and lk > 0, {"lq": lq, "lk": lk}


def _head_dim_efficient(x: Inputs) -> Verdict:
    q = x.dtypes[0]
    if q is None:
        return None, {}
    half = q in ("float16", "bfloat16")
    a = _arch(x)
    align = max(4, 128 // (16 if half else 32)) if a >= (8, 0) else (8 if half and a >= (7, 0) else 1)
    if x.vendor == "AMD":
        align = 8 if half else 4  # ROCm: the alignment does not depend on the architecture
    h = _hd(x)
    ok = h["dq"] == h["dk"] and h["dq"] % align == 0 and h["dv"] % align == 0 and h["dq"] > 0 and h["dv"] > 0
    if ok and x.vendor == "AMD" and max(h["dq"], h["dv"]) > 256:
        return None, h  # AOTriton >= 0.12 caps it at its own limit (256 or 512): the version is not recorded
    return ok, {**h, "align": align, "dtype": q}


def _mask_shape(x: Inputs) -> Verdict:
    if not x.mask_known:
        return None, {}
    m = x.mask_dims
    if m is None:
        return True, {}
    b, h, lq, lk = x.dims[0][0], x.dims[0][-3], x.dims[0][-2], x.dims[1][-2]
    ok = len(m) >= 2 and m[-2] in (lq, 1) and m[-1] in (lk, 1) and (
        len(m) == 2 or (len(m) == 4 and m[0] in (1, b) and m[1] in (1, h)))
    return ok, {"mask_dims": m}


def _cudnn_dropout(x: Inputs) -> Verdict:
    if x.dropout is None:
        return None, {}
    return (x.dropout * 16.0).is_integer(), {"dropout": x.dropout}


def _cudnn_shapes(x: Inputs) -> Verdict:
    q, k, v = x.dims
    why = []
    if q[0] > 65535 or q[-3] > 65535:
        why.append(f"batch {q[0]} or heads {q[-3]} over 65535")
    dq, dv = q[-1], v[-1]
    if dq % 8 or dv % 8:
        why.append(f"head dim {dq}/{dv} not a multiple of 8")
    if max(dq, dv) > 256:
        why.append(f"head dim {max(dq, dv)} over 256")
    if k[-2] == 1:
        why.append("k_len 1")
    if why:
        return False, {"cudnn_shape": "; ".join(why)}
    if max(dq, dv) > 128:
        return None, {}  # 129..256 depends on the cuDNN version, which the trace does not record
    return True, {}


def _switched_on(backend: str) -> Callable[[Inputs], Verdict]:
    """check_runtime_disabled_*: the backend's sdpa_kernel / enable_*_sdp switch, as the collector read it at the call."""
    def check(x: Inputs) -> Verdict:
        if x.enabled is None:
            return None, {}
        on = [b for b in SDP_BACKENDS if b in x.enabled]
        pinned = (f"pinned to {on[0]} by sdpa_kernel (or enable_*_sdp)" if len(on) == 1
                  else f"only {', '.join(on)} enabled (sdpa_kernel / enable_*_sdp)" if on else "every SDPA backend off")
        return backend in x.enabled, {"pinned": pinned}
    return check


PREDICATES: dict[tuple[str, str], Callable[[Inputs], Verdict]] = {
    ("flash", "check_runtime_disabled_flash"): _switched_on("flash"),
    ("efficient", "check_runtime_disabled_mem_efficient"): _switched_on("efficient"),
    ("cudnn", "check_runtime_disabled_cudnn"): _switched_on("cudnn"),
    ("*", "check_tensor_shapes"): _four_d,
    ("flash", "check_for_attn_mask"): _no_mask,
    ("flash", "check_head_dim_size_flash"): _head_dim_flash,
    ("flash", "check_flash_attention_hardware_support"): lambda x: _in_range(x, (8, 0), (12, 1)),
    ("flash", "check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120"): _grad_head_dim,
    ("flash", "check_flash_causal_non_square_seqlens"): _causal_square,
    ("flash", "check_dtypes_flash_attention"): _low_precision,
    ("flash", "check_batch_size_and_num_heads_dense"): _heads(True),
    ("*", "check_nonzero_sequence_lengths_dense"): _nonzero,
    ("flash", "check_last_dim_stride_equals_1_dense"): _last_dim_stride(True),
    ("efficient", "check_last_dim_stride_equals_1_dense"): _last_dim_stride(False),
    ("cudnn", "check_last_dim_stride_equals_1_dense"): _last_dim_stride(True),
    ("efficient", "check_mem_efficient_hardware_support"): lambda x: _in_range(x, (5, 0), (12, 1)),
    ("efficient", "check_head_dim_size_mem_efficient"): _head_dim_efficient,
    # ROCm's efficient kernel supports neither GQA nor MQA (supports_gqa = false under USE_ROCM)
    ("efficient", "check_batch_size_and_num_heads_dense"): lambda x: _heads(x.vendor != "AMD")(x),
    ("efficient", "check_tensor_dtype"): _efficient_dtypes,
    ("cudnn", "USE_ROCM"): lambda x: (x.vendor != "AMD", {}),
    ("cudnn", "check_dtypes_low_precision"): _low_precision,
    ("cudnn", "check_attn_mask_shape"): _mask_shape,
    ("cudnn", "check_cudnn_hardware_support"): lambda x: _in_range(x, (8, 0), (12, 1)),
    ("cudnn", "check_cudnn_dropout"): _cudnn_dropout,
    ("cudnn", "check_cudnn_tensor_shapes"): _cudnn_shapes,
    ("cudnn", "check_batch_size_and_num_heads_dense"): _heads_cudnn,
}


def _no_dropout(x: Inputs) -> Verdict:
    if x.dropout is None:
        return None, {}
    return not x.dropout > 0, {"dropout": x.dropout}


def _same_head_dims(x: Inputs) -> Verdict:
    h = _hd(x)
    return h["dq"] == h["dk"] == h["dv"], h


# The CPU's checks (eligibility_rules.CPU_CHECKS): the CPU flash kernel supports GQA and ignores no singleton dim.
CPU_PREDICATES: dict[str, Callable[[Inputs], Verdict]] = {
    "check_runtime_disabled_flash": _switched_on("flash"),  # the CPU's flash kernel has the same switch
    "check_nested_tensor": lambda x: (True, {}),  # a nested tensor records no sizes: dims recorded means dense
    "check_for_dropout": _no_dropout,
    "check_tensor_shapes": _four_d,
    "check_batch_size_and_num_heads_dense": _heads(True),
    "check_attn_mask_shape": _mask_shape,
    "check_head_dim_size_cpp": _same_head_dims,
    "check_nonzero_sequence_lengths_dense": _nonzero,
    "check_last_dim_stride_equals_1_dense": _last_dim_stride(False),
    "check_tensor_dtype": _dtype_in(("float32", "float64", "bfloat16", "float16")),
}
CPU_DEVICE = "the CPU (PyTorch's CPU SDPA: its flash kernel or math; no efficient or cuDNN kernel)"


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def judge(x: Inputs, cpu: bool = False) -> dict[str, Any]:
    """Per fused backend: refused (each failing check with its reason, fix and source), eligible, or
    unknown (the checks the trace cannot answer). Unlike PyTorch, which stops at the first refusal,
    every check is run, so that one reading lists every fix needed. ``cpu``: the call ran on the CPU,
    judged by the CPU's rules (CPU_CHECKS), never by a GPU's."""
    out = []
    four_d = all(len(v) == 4 for v in x.dims)  # the other checks read (B, H, L, E): PyTorch stops at this one
    for backend in CPU_BACKENDS if cpu else BACKENDS:
        refusals, unknown = [], []
        for row in (r for r in (CPU_CHECKS if cpu else CHECKS) if r.backend == backend):
            pred = (CPU_PREDICATES.get(row.check) if cpu
                    else PREDICATES.get((backend, row.check)) or PREDICATES.get(("*", row.check)))
            if pred is None:
                unknown.append({"check": row.check, "why": UNANSWERABLE.get(row.check, "not replayed")})
                continue
            if not four_d and pred is not _four_d:
                unknown.append({"check": row.check, "why": "not replayed: it reads 4-D (B, H, L, E) inputs"})
                continue
            ok, values = pred(x)
            if ok is None:
                unknown.append({"check": row.check,
                                "why": UNANSWERABLE.get(row.check, "the trace does not record what it needs")})
            elif not ok:
                refusals.append({"check": row.check, "reason": row.reason.format_map(_Blank(values)),
                                 "fix": row.fix.format_map(_Blank(values)), "source": row.source})
        # eligible: True when nothing refuses and only the never-recorded switches are open
        open_ = any(u["check"] not in UNANSWERABLE for u in unknown)
        out.append({"backend": backend, "eligible": False if refusals else (None if open_ else True),
                    "refusals": refusals, "unknown": unknown})
    device = CPU_DEVICE if cpu else _arch_text(x) if x.vendor != "AMD" else "AMD GPU (ROCm rules differ: AOTriton/CK)"
    return {"device": device,
            "rules": TORCH_SOURCE, "backends": out}
