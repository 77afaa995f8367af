"""User marks for hand-written attention: ``attention_region`` (one call) and ``stage`` (a stage inside it).

Both are context managers and decorators. Outside a profiling window, and inside torch.compile'd
code (where dynamo drops record_function anyway), they do nothing.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch.autograd.profiler import record_function

from ..format import tags
from . import describe, state

_USER_FIELDS = frozenset(tags.CALL_FIELDS) - {"layer"}


class _Mark:
    name: str

    def __enter__(self):
        self._rf = None
        if torch.compiler.is_compiling() or not state.active or not self._should_open():
            return self
        self._rf = record_function(self._range_name())
        self._rf.__enter__()
        self._opened()
        return self

    def __exit__(self, *exc):
        if self._rf is not None:
            self._closed()
            self._rf.__exit__(*exc)
            self._rf = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self._copy():
                return fn(*args, **kwargs)

        return wrapped

    def _should_open(self) -> bool:
        return True

    def _opened(self) -> None:
        pass

    def _closed(self) -> None:
        pass


class attention_region(_Mark):
    """Marks one attention call of your own: ``with attention_region("blocks.0.attn", q=q, k=k): ...``.

    ``layer`` names it in the report (default: the enclosing module's class, or the decorated
    function's name). ``q``/``k`` (tensors shaped (batch, heads, len, dim)) fill the shape fields;
    any other field of ``tags.CALL_FIELDS`` may be given directly (``causal=True``, ``impl="triton"``).
    Calls of SDPA and friends inside the region belong to it and are not tagged again.
    """

    def __init__(self, layer: str | None = None, *, q: torch.Tensor | None = None, k: torch.Tensor | None = None,
                 impl: str = "user", **fields: Any):
        unknown = set(fields) - _USER_FIELDS
        if unknown:
            raise TypeError(f"attention_region: unknown field(s) {', '.join(sorted(unknown))}; "
                            f"known: {', '.join(sorted(_USER_FIELDS))}")
        if layer is not None and not isinstance(layer, str):
            raise TypeError(f"attention_region: layer must be a string, not {type(layer).__name__}")
        self.layer, self.q, self.k, self.impl, self.fields = layer, q, k, impl, fields

    def _copy(self):
        return attention_region(self.layer, q=self.q, k=self.k, impl=self.impl, **self.fields)

    def __call__(self, fn):
        if self.layer is None:
            self.layer = fn.__qualname__
        return super().__call__(fn)

    def _should_open(self) -> bool:
        return not state.local.depth  # nested in another tagged call: part of it

    def _range_name(self) -> str:
        fields = dict(self.fields)
        if self.q is not None and self.k is not None:
            for key, v in describe.bhld(self.q, self.k).items():
                fields.setdefault(key, v)
            fields.setdefault("dtype", describe.dtype_name(self.q))
        layer = self.layer
        if layer is None:
            layer = _enclosing_module_name(sys._getframe(2)) or "user_attention"
        return tags.call_name(layer=layer, impl=self.impl, compiled=False, **fields)

    def _opened(self) -> None:
        state.local.depth += 1

    def _closed(self) -> None:
        state.local.depth -= 1


class stage(_Mark):
    """Marks a stage of a hand-written attention call: ``with stage("qk"): ...`` (names and short
    forms in ``tags.STAGES``/``tags.STAGE_ALIASES``). An unknown name is an error at once, even
    outside a profiling window, so a typo never goes unnoticed."""

    def __init__(self, name: str):
        self.name = tags.stage_name(name)  # raises ValueError on an unknown stage

    def _copy(self):
        s = stage.__new__(stage)
        s.name = self.name
        return s

    def _range_name(self) -> str:
        return self.name


def _enclosing_module_name(frame) -> str | None:
    from .locate import Locator

    m = Locator({}).caller_module(frame)
    return type(m).__name__ if m is not None else None
