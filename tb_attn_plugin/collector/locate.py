"""Which module made an attention call: module paths of the user's model, and a short walk up the
Python stack at call time (only attention calls pay for it; no per-module hooks are needed)."""

from __future__ import annotations

import re
from typing import Any

import torch

MAX_FRAMES = 12  # SDPA is usually called 1-3 frames below its module's forward
_COMPILED_PART = re.compile(r"(^|\.)_orig_mod(?=\.|$)")


def clean_path(path: str) -> str:
    """Drop the ``_orig_mod`` hop that torch.compile's wrapper adds to module paths."""
    return _COMPILED_PART.sub("", path).lstrip(".")


def module_paths(model: torch.nn.Module | None) -> dict[int, str]:
    """id(module) -> its path as ``model.named_modules()`` gives it, e.g. ``model.layers.0.self_attn`` in a Hugging
    Face ``LlamaForCausalLM`` (whose ``model`` is its own submodule: no prefix is added, which made it
    ``model.model.layers.0``); the model itself, whose path is empty, by its class name."""
    if model is None:
        return {}
    out = {}
    root = type(getattr(model, "_orig_mod", model)).__name__  # torch.compile's wrapper: the model it wraps
    for name, m in model.named_modules():
        name = clean_path(name)
        out.setdefault(id(m), name or root)
    return out


class Locator:
    def __init__(self, paths: dict[int, str]):
        self.paths = paths
        self._unnamed: dict[int, str] = {}

    def name_of(self, m: torch.nn.Module) -> str:
        p = self.paths.get(id(m))
        if p is not None:
            return p
        # Not in the given model (or no model given): class name and an ordinal, stable per instance.
        p = self._unnamed.get(id(m))
        if p is None:
            cls = type(m).__name__
            n = sum(1 for v in self._unnamed.values() if v.rsplit(".", 1)[0] == cls)
            p = self._unnamed[id(m)] = f"{cls}.{n}"
        return p

    def caller_module(self, frame) -> torch.nn.Module | None:
        """The innermost module on the stack above ``frame``: a ``self`` (a forward method) or a
        ``module`` argument (Hugging Face attention functions take the module as ``module``)."""
        first = None
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] in ("self", "module"):
                m = frame.f_locals.get(code.co_varnames[0])
                if isinstance(m, torch.nn.Module):
                    if not self.paths or id(m) in self.paths:
                        return m
                    first = first or m
            frame = frame.f_back
        return first


def hf_implementation(m: Any) -> str | None:
    cfg = getattr(m, "config", None)
    impl = getattr(cfg, "_attn_implementation", None)
    return impl if isinstance(impl, str) else None
