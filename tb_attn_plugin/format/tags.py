"""The tag format: how the collector marks attention in a trace, and how the engine reads it back.

This module is the contract between ``tb_attn_plugin.collector`` (writes, needs torch) and the
analysis engine (reads, must not import torch), so it imports neither.

Format, version 1 (all through standard torch.profiler APIs, so any kineto reader sees them):

* One ``record_function`` range per attention call, named ``tb_attn::call `` followed by the call's
  fields as a URL query string (``layer=model.layers.0.self_attn&impl=sdpa&lq=128``; CALL_FIELDS
  below). Not JSON: torch.profiler writes event names into the trace without escaping quotes, so a
  name must never hold a double quote or a backslash; percent-encoding guarantees that. The range appears as a
  ``user_annotation`` event that encloses the ops of the call on the calling thread; backward
  kernels reach it through the forward ops' autograd links, so they need no tag of their own.
* Inside a user-marked region, optional stage ranges ``tb_attn::stage <stage>`` (stage names as in
  STAGES) tell the engine the stage of hand-written kernels.
* Around each attention module of the model (a class named like attention, attention/patterns.py
  ``is_attention_module``) that no call tag covers as a whole, a range ``tb_attn::module `` followed by
  ``layer=<module path>&cls=<class>``: not a call, a name. Whatever the engine finds inside it (the eager
  motif, an SDPA op) is named by the module path, as SDPA calls tagged by the wrappers are, so one
  layer has one name in every variant of a model.
* Run metadata, once per trace, with ``prof.add_metadata_json("tb_attn", json)``: a JSON object with
  ``format`` (this version), ``variant`` (the user's name for the run), ``torch``, ``device``,
  ``host``, ``rank``, ``world_size`` and any user ``extra``.
"""

from __future__ import annotations

import json
from typing import Any
import math
from urllib.parse import parse_qsl, urlencode

FORMAT_VERSION = 1
METADATA_KEY = "tb_attn"
CALL_PREFIX = "tb_attn::call "
STAGE_PREFIX = "tb_attn::stage "
MODULE_PREFIX = "tb_attn::module "

STAGES = ("qkv_proj", "qk_matmul", "scale_mask", "softmax", "dropout", "av_matmul", "out_proj", "fused",
          # Sub-stages of a call made of several kernels (attention/patterns.py HELPER_STAGES).
          "quantize", "kv_cache_write", "preprocess", "split_kv_reduce", "postprocess", "other")
# The stages that make the attention core (the score matrix's path): the roofline models them and the
# core's time is their sum; the rest (projections, helpers, other) surround the core.
CORE_STAGES = ("qk_matmul", "scale_mask", "softmax", "dropout", "av_matmul", "fused")
# Short names accepted from users in stage marks.
STAGE_ALIASES = {"qkv": "qkv_proj", "qk": "qk_matmul", "scores": "qk_matmul", "mask": "scale_mask",
                 "scale": "scale_mask", "av": "av_matmul", "out": "out_proj", "proj": "out_proj"}

# Keys of a call tag; all optional except ``layer``.
CALL_FIELDS = {
    "layer": "module path of the attention layer, e.g. model.layers.3.self_attn",
    "impl": "implementation requested: sdpa, eager, mha, flex, hf:<attn_implementation>, user",
    "backend": "SDPA backend selected by the dispatcher: flash, efficient, cudnn, math, flash_cpu, overrideable",
    "b": "batch", "hq": "query heads", "hkv": "key/value heads", "lq": "query length", "lk": "key length",
    "d": "head dim", "dtype": "torch dtype name without 'torch.'", "causal": "bool", "mask": "none, bool, additive, causal",
    "dropout": "dropout probability", "scale": "softmax scale or null", "gqa": "bool", "compiled": "bool",
    "cls": "class name of the attention module (the report's layer_type)",
    "need_weights": "bool: nn.MultiheadAttention returned its attention weights (need_weights=True, its default)",
    "sdp": "SDPA backends enabled at the call, comma-separated of flash, efficient, cudnn, math ('none': all off): "
           "the sdpa_kernel / torch.backends.cuda.enable_*_sdp switches PyTorch's dispatcher reads, on the CPU too",
}
SDP_BACKENDS = ("flash", "efficient", "cudnn", "math")


INT_FIELDS = frozenset({"b", "hq", "hkv", "lq", "lk", "d", "mem_peak"})
FLOAT_FIELDS = frozenset({"dropout", "scale"})
BOOL_FIELDS = frozenset({"causal", "gqa", "compiled", "need_weights"})
# A tag is text anyone can write into a trace: integers past this (256 Ti) and non-finite floats are
# no real tensor's, so they are dropped as unparsable rather than carried into sums and ratios.
MAX_TAG_INT = 1 << 48


def _encode(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def call_name(**fields: Any) -> str:
    """The record_function name of one tagged call (fields that are None are left out)."""
    # A layer makes the same call every step: encoding it once per distinct call keeps the
    # collector's cost per attention call to a dict lookup (urlencode was most of it).
    try:
        key = tuple((k, type(v), v) for k, v in fields.items())
        hit = _names.get(key)
    except TypeError:  # an unhashable value: encode it every time
        return _call_name(fields)
    if hit is None:
        hit = _call_name(fields)
        if len(_names) >= _MAX_NAMES:
            _names.clear()
        _names[key] = hit
    return hit


_names: dict[tuple, str] = {}
_MAX_NAMES = 4096  # distinct (layer, shape, ...) calls remembered; beyond that, start over


def _call_name(fields: dict[str, Any]) -> str:
    return CALL_PREFIX + urlencode({k: _encode(v) for k, v in fields.items() if v is not None})


def stage_name(stage: str) -> str:
    stage = STAGE_ALIASES.get(stage, stage)
    if stage not in STAGES:
        raise ValueError(f"unknown attention stage {stage!r}; expected one of {', '.join(STAGES)}")
    return STAGE_PREFIX + stage


def parse_call(name: str) -> dict[str, Any] | None:
    """The fields of a call tag, or None when ``name`` is not one. A field whose value does not
    parse is dropped, not guessed."""
    if not name.startswith(CALL_PREFIX):
        return None
    out: dict[str, Any] = {}
    for k, v in parse_qsl(name[len(CALL_PREFIX):], keep_blank_values=False):
        try:
            if k in INT_FIELDS:
                n = int(v) if len(v) <= 20 else None  # never int() of a 5,000-digit string
                if n is None or not 0 <= n < MAX_TAG_INT:
                    continue
                out[k] = n
            elif k in FLOAT_FIELDS:
                x = float(v)
                if not math.isfinite(x):
                    continue
                out[k] = x
            elif k in BOOL_FIELDS:
                out[k] = v in ("1", "true", "True")
            else:
                out[k] = v
        except ValueError:
            continue
    return out


def module_scope_name(layer: str, cls: str) -> str:
    """The record_function name of an attention module's scope."""
    return MODULE_PREFIX + urlencode({"layer": layer, "cls": cls})


def parse_module_scope(name: str) -> tuple[str, str] | None:
    """(module path, class) of a module scope, or None when ``name`` is not one (or names no layer)."""
    if not name.startswith(MODULE_PREFIX):
        return None
    fields = dict(parse_qsl(name[len(MODULE_PREFIX):], keep_blank_values=False))
    layer = fields.get("layer", "")
    return (layer, fields.get("cls", "")) if layer else None


def parse_stage(name: str) -> str | None:
    if not name.startswith(STAGE_PREFIX):
        return None
    stage = name[len(STAGE_PREFIX):].strip()
    return stage if stage in STAGES else None


def run_metadata(variant: str | None = None, **fields: Any) -> str:
    """The JSON given to ``prof.add_metadata_json(METADATA_KEY, ...)``."""
    return json.dumps({"format": FORMAT_VERSION, "variant": variant, **fields}, default=str)
