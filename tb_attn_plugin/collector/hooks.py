"""Tagging attention calls while a profiling window records, and nothing at all outside it.

* Functions (``F.scaled_dot_product_attention``, FlexAttention): the module attribute, and every
  alias a user module bound at import (``from torch.nn.functional import scaled_dot_product_attention``),
  is swapped for a wrapper while the window records and swapped back when it closes. A wrapper only
  costs on attention calls (a TorchFunctionMode would cost on every torch call, and turns off the
  ``nn.MultiheadAttention`` fast path).
* Modules whose attention is not one function call (``nn.MultiheadAttention``, Hugging Face
  ``eager`` attention): forward pre/post hooks, registered at window start and removed at its end.
* torch.compile: dynamo guards on the identity of the functions it traced and on module hooks, so
  compiled modules run with every patch undone (hooks around the compiled module do that, outside
  its frame) and modules inside them get no hooks. Their attention is found by the engine from the
  ops that survive compilation. Result: no graph break, no recompile.
"""

from __future__ import annotations

import functools
import re
import sys
from typing import Any, Callable

import torch
from torch.autograd.profiler import record_function

from ..format import tags
from . import describe, locate, state

HF_ATTENTION_CLASS = re.compile(r"Attention\d*$")
# Implementations whose attention runs through F.scaled_dot_product_attention or flex_attention,
# which the function wrappers see with exact shapes; others get a module-level tag.
FUNCTION_ROUTED = ("sdpa", "flex_attention")
_SKIP_MODULE_PREFIXES = ("torch", "numpy", "tensorboard", "_", "builtins", "tb_attn_plugin")


def _is_compiled_module(m: torch.nn.Module) -> bool:
    return type(m).__name__ == "OptimizedModule" or getattr(m, "_compiled_call_impl", None) is not None


class Tagger:
    def __init__(self, model: torch.nn.Module | None):
        self.model = model
        self.locator = locate.Locator(locate.module_paths(model))
        self._patches: list[tuple[dict, str, Any, Any]] = []  # (namespace, name, original, wrapper)
        self._handles: list[Any] = []
        self._swapped: list[tuple[torch.nn.Module, Any]] = []  # modules whose _compiled_call_impl we wrapped
        self._suspended = 0
        self.installed = False

    # -- window start / end ----------------------------------------------------------------------
    def install(self) -> None:
        if self.installed:
            return
        self._patch_functions()
        self._hook_modules()
        self.installed = True
        state.active = True

    def uninstall(self) -> None:
        state.active = False
        if not self.installed:
            return
        for ns, name, orig, _ in self._patches:
            ns[name] = orig
        self._patches.clear()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for m, orig in self._swapped:
            m._compiled_call_impl = orig
        self._swapped.clear()
        self._suspended = 0
        self.installed = False

    # -- compiled modules run untouched ----------------------------------------------------------
    def suspend(self) -> None:
        self._suspended += 1
        if self._suspended == 1:
            for ns, name, orig, _ in self._patches:
                ns[name] = orig
            state.active = False

    def resume(self) -> None:
        self._suspended = max(0, self._suspended - 1)
        if self._suspended == 0 and self.installed:
            for ns, name, _, wrapper in self._patches:
                ns[name] = wrapper
            state.active = True

    # -- functions --------------------------------------------------------------------------------
    def _patch_functions(self) -> None:
        targets: dict[int, Callable] = {}  # id(original) -> wrapper
        F = torch.nn.functional
        sdpa = F.scaled_dot_product_attention
        targets[id(sdpa)] = self._wrap(sdpa, "sdpa", describe.sdpa_fields)
        namespaces = [vars(F)]
        flex_mod = sys.modules.get("torch.nn.attention.flex_attention")  # never import it for users
        if flex_mod is not None:
            flex = flex_mod.flex_attention
            targets[id(flex)] = self._wrap(flex, "flex", describe.flex_fields)
            namespaces.append(vars(flex_mod))
        originals = {id(w.__wrapped__): w.__wrapped__ for w in targets.values()}
        for name, mod in list(sys.modules.items()):
            if mod is None or name.startswith(_SKIP_MODULE_PREFIXES):
                continue
            ns = getattr(mod, "__dict__", None)
            if isinstance(ns, dict):
                namespaces.append(ns)
        for ns in namespaces:
            for key, value in list(ns.items()):
                w = targets.get(id(value))
                if w is not None and value is originals[id(value)]:
                    self._patches.append((ns, key, value, w))
        for ns, key, _, w in self._patches:
            ns[key] = w

    def _wrap(self, orig: Callable, impl: str, fields_of: Callable) -> Callable:
        locator = self.locator

        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            if torch.compiler.is_compiling() or state.local.depth or not state.active:
                return orig(*args, **kwargs)
            fields = fields_of(args, kwargs)
            m = locator.caller_module(sys._getframe(1))
            layer, cls, how = "", None, impl
            if m is not None:
                layer, cls = locator.name_of(m), type(m).__name__
                hf = locate.hf_implementation(m)
                if hf is not None:
                    how = f"hf:{hf}"
            name = tags.call_name(layer=layer, cls=cls, impl=how, compiled=False, **fields)
            state.local.depth += 1
            try:
                with record_function(name):
                    return orig(*args, **kwargs)
            finally:
                state.local.depth -= 1

        return wrapper

    # -- modules ----------------------------------------------------------------------------------
    def _hook_modules(self) -> None:
        if self.model is None:
            # No model given: one global hook pair sees every module (filtered by type below).
            self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._global_pre))
            self._handles.append(torch.nn.modules.module.register_module_forward_hook(self._global_post, always_call=True))
            return
        inside_compiled: set[int] = set()
        for m in self.model.modules():
            if id(m) in inside_compiled:
                continue
            if _is_compiled_module(m):
                self._guard_compiled(m)
                inside_compiled.update(id(c) for c in m.modules() if c is not m)
                continue
            if self._tag_kind(m) is not None:
                self._handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
                self._handles.append(m.register_forward_hook(self._post, with_kwargs=True, always_call=True))
            elif self._scoped(m):
                self._handles.append(m.register_forward_pre_hook(self._scope_pre))
                self._handles.append(m.register_forward_hook(self._scope_post, always_call=True))

    def _scoped(self, m: torch.nn.Module) -> bool:
        """An attention module (by the engine's class-name rule) with no attention module inside it:
        its scope names whatever attention the engine finds in it by the module path."""
        from ..attention.patterns import is_attention_module

        if not is_attention_module(type(m).__name__):
            return False
        return not any(c is not m and is_attention_module(type(c).__name__) for c in m.modules())

    def _scope_pre(self, m, args):
        rf = None
        if not torch.compiler.is_compiling() and state.active:
            rf = record_function(tags.module_scope_name(self.locator.name_of(m), type(m).__name__))
            rf.__enter__()
        state.local.scopes.append(rf)

    def _scope_post(self, m, args, output):
        rf = state.local.scopes.pop() if state.local.scopes else None
        if rf is not None:
            rf.__exit__(None, None, None)

    @functools.lru_cache(maxsize=None)
    def _kind_of_type(self, cls: type) -> str | None:
        if issubclass(cls, torch.nn.MultiheadAttention):
            return "mha"
        if HF_ATTENTION_CLASS.search(cls.__name__):
            return "hf?"
        return None

    def _tag_kind(self, m: torch.nn.Module) -> str | None:
        kind = self._kind_of_type(type(m))
        if kind == "hf?":
            impl = locate.hf_implementation(m)
            if impl is None or impl in FUNCTION_ROUTED:
                return None
            # Innermost attention module only (BertAttention holds BertSelfAttention).
            if any(c is not m and locate.hf_implementation(c) and HF_ATTENTION_CLASS.search(type(c).__name__)
                   for c in m.modules()):
                return None
            return "hf"
        return kind

    def _pre(self, m, args, kwargs):
        rf = None
        if not torch.compiler.is_compiling() and state.active and not state.local.depth:
            kind = self._tag_kind(m)
            if kind == "mha":
                fields = describe.mha_fields(m, args, kwargs)
                impl = "mha"
            else:
                fields = describe.hf_fields(m, args, kwargs)
                impl = f"hf:{locate.hf_implementation(m)}"
            name = tags.call_name(layer=self.locator.name_of(m), cls=type(m).__name__, impl=impl, compiled=False,
                                  **fields)
            rf = record_function(name)
            rf.__enter__()
            state.local.depth += 1
        state.local.open.append(rf)

    def _post(self, m, args, kwargs, output):
        rf = state.local.open.pop() if state.local.open else None
        if rf is not None:
            state.local.depth -= 1
            rf.__exit__(None, None, None)

    def _global_pre(self, m, args):
        if self._tag_kind(m) is None:
            return
        self._pre(m, args, {})
        state.local.global_open.append(id(m))

    def _global_post(self, m, args, output):
        if state.local.global_open and state.local.global_open[-1] == id(m):
            state.local.global_open.pop()
            self._post(m, args, {}, output)

    def _guard_compiled(self, m: torch.nn.Module) -> None:
        if type(m).__name__ == "OptimizedModule":
            # Its hooks run in Module.__call__, outside the compiled frame.
            self._handles.append(m.register_forward_pre_hook(lambda *_: self.suspend()))
            self._handles.append(m.register_forward_hook(lambda *_: self.resume(), always_call=True))
            return
        orig = m._compiled_call_impl  # set by module.compile(); its hooks run inside the compiled frame

        def call(*args, **kwargs):
            self.suspend()
            try:
                return orig(*args, **kwargs)
            finally:
                self.resume()

        m._compiled_call_impl = call
        self._swapped.append((m, orig))

