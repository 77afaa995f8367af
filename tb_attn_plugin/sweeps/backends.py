"""Each backend of a sweep as a ready-to-time call on fixed inputs: SDPA pinned with sdpa_kernel,
eager matmul-softmax-matmul, compiled FlexAttention, or a user's own module (``pkg.mod:factory``)."""

from __future__ import annotations

import contextlib
import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from .grid import Cell, GridError

SDPA_BACKENDS = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                 "cudnn": "CUDNN_ATTENTION"}


class Unsupported(Exception):
    """The backend cannot run this configuration; str() is the reason (sdpa_kernel's RuntimeError)."""


@dataclass
class Prepared:
    step: Callable[[], Any]  # one timed call: the forward, or forward and backward
    forward: Callable[[], torch.Tensor]  # the forward's output, for the check against math
    context: Callable[[], contextlib.AbstractContextManager]  # entered around every call (backend pinning)
    reference: Callable[[], torch.Tensor] | None  # the math backend on the same inputs; None: no reference
    # What the Timer runs: the call itself with its tensors as globals, without the Python wrapper
    # layers of ``step`` (a microsecond or two, which is a tenth of a small fused cell on a CPU).
    stmt: str = "step()"
    timer_globals: dict[str, Any] | None = None

    def timer_args(self) -> tuple[str, dict[str, Any]]:
        return self.stmt, (self.timer_globals if self.timer_globals is not None else {"step": self.step})


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _inputs(cell: Cell, grad: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (B, H, L, D), k and v (B, KV, L, D): the same numbers for every backend of a shape."""
    g = torch.Generator(device=cell.device).manual_seed(1000003 * cell.batch + cell.seq_len)
    dt = torch_dtype(cell.dtype)

    def t(h: int) -> torch.Tensor:
        x = torch.randn(cell.batch, h, cell.seq_len, cell.head_dim, generator=g, device=cell.device, dtype=dt)
        return x.requires_grad_(grad)

    return t(cell.heads), t(cell.kv_heads), t(cell.kv_heads)


def _sdpa_kwargs(cell: Cell) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"is_causal": cell.causal}
    if cell.kv_heads != cell.heads:
        kwargs["enable_gqa"] = True
    return kwargs


def _sdpa(cell: Cell) -> Callable[..., torch.Tensor]:
    kwargs = _sdpa_kwargs(cell)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)


def _eager(cell: Cell) -> Callable[..., torch.Tensor]:
    rep = cell.heads // cell.kv_heads
    scale = 1.0 / math.sqrt(cell.head_dim)
    mask = None
    if cell.causal:
        mask = torch.ones(cell.seq_len, cell.seq_len, dtype=torch.bool, device=cell.device).triu(1)

    def eager(q, k, v):
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-2, -1)) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    return eager


_FLEX: dict[str, Any] = {}


def _flex(cell: Cell) -> Callable[..., torch.Tensor]:
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as e:
        raise Unsupported(f"FlexAttention is not in torch {torch.__version__}: {e}") from None
    if "compiled" not in _FLEX:
        # One compiled function per process; each shape compiles on first use (the warm-up). Dynamo
        # gives up recompiling a function after a few shapes (then FlexAttention would run unfused,
        # and slowly): a sweep's grid needs one compilation per shape.
        # imported by name: `import torch._dynamo` would make `torch` a local of this function, unbound
        # in the ImportError message above (ruff F823)
        dynamo_config = importlib.import_module("torch._dynamo").config
        for limit in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                      "accumulated_cache_size_limit"):
            if hasattr(dynamo_config, limit):
                setattr(dynamo_config, limit, max(getattr(dynamo_config, limit), 1024))
        _FLEX["compiled"] = torch.compile(flex_attention, dynamic=False)
    compiled = _FLEX["compiled"]
    block_mask = None
    if cell.causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, B=None, H=None,
                                       Q_LEN=cell.seq_len, KV_LEN=cell.seq_len, device=cell.device)
    gqa = cell.kv_heads != cell.heads
    return lambda q, k, v: compiled(q, k, v, block_mask=block_mask, enable_gqa=gqa)


def load_factory(spec: str) -> Callable[..., Any]:
    """``package.module:factory`` -> the factory; GridError naming what is missing."""
    mod_name, _, attr = spec.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # the user's module may fail in any way while importing
        raise GridError(f"--module {spec}: cannot import {mod_name}: {type(e).__name__}: {e}") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise GridError(f"--module {spec}: {mod_name} has no callable {attr!r}")
    return factory


def _first_tensor(out: Any) -> torch.Tensor:
    # Hugging Face attention layers return (output, weights, ...)
    if isinstance(out, (tuple, list)) and out:
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"the module returned {type(out).__name__}, not a tensor (or a tuple starting with one)")
    return out


def _module(cell: Cell, grad: bool) -> Prepared:
    """The factory is called as factory(heads=, head_dim=, kv_heads=, dtype=, device=, causal=) and
    returns (fn, make_inputs): fn a module or callable, make_inputs(batch, seq_len) its positional
    arguments (a tuple) or keyword arguments (a dict)."""
    factory = load_factory(str(cell.module))
    got = factory(heads=cell.heads, head_dim=cell.head_dim, kv_heads=cell.kv_heads, dtype=torch_dtype(cell.dtype),
                  device=torch.device(cell.device), causal=cell.causal)
    if not (isinstance(got, tuple) and len(got) == 2 and callable(got[0]) and callable(got[1])):
        raise GridError(f"--module {cell.module}: the factory must return (fn, make_inputs), "
                        f"not {type(got).__name__}")
    fn, make_inputs = got
    if isinstance(fn, torch.nn.Module):
        fn = fn.to(device=cell.device)
    args = make_inputs(cell.batch, cell.seq_len)
    kwargs: dict[str, Any] = {}
    if isinstance(args, dict):
        args, kwargs = (), args
    elif not isinstance(args, (tuple, list)):
        args = (args,)
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    leaves = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor) and a.requires_grad]

    def forward():
        return _first_tensor(fn(*args, **kwargs))

    step: Callable[[], Any] = forward
    if grad:
        wrt = leaves + [p for p in params if p.requires_grad]
        if not wrt:
            raise GridError(f"--module {cell.module}: --pass fwd+bwd needs inputs or parameters that require grad")
        g_out = torch.randn_like(forward())

        def step():
            torch.autograd.grad(forward(), wrt, g_out)

    return Prepared(step, forward, contextlib.nullcontext, None)


def prepare(cell: Cell) -> Prepared:
    """Inputs and calls for one cell. Raises Unsupported for a backend missing here; errors of the
    configuration itself (sdpa_kernel refusing it, an OOM) surface on the first call."""
    grad = cell.pass_ == "fwd+bwd"
    if cell.backend == "module":
        return _module(cell, grad)
    q, k, v = _inputs(cell, grad)
    if cell.backend in SDPA_BACKENDS:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, SDPA_BACKENDS[cell.backend], None)
        if backend is None:
            raise Unsupported(f"torch {torch.__version__} has no SDPBackend.{SDPA_BACKENDS[cell.backend]}")
        attn = _sdpa(cell)
        context: Callable[[], contextlib.AbstractContextManager] = lambda: sdpa_kernel(backend)
    elif cell.backend == "eager":
        attn, context = _eager(cell), contextlib.nullcontext
    elif cell.backend == "flex":
        attn, context = _flex(cell), contextlib.nullcontext
    else:
        raise GridError(f"unknown backend {cell.backend!r}")

    math_attn = _sdpa(cell)

    def reference() -> torch.Tensor:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
            return math_attn(q, k, v)

    def forward():
        return attn(q, k, v)

    step: Callable[[], Any] = forward
    g_out = None
    if grad:
        g_out = torch.randn(q.shape, device=q.device, dtype=q.dtype)

        def step():
            # autograd.grad, not backward(): nothing accumulates into .grad between calls
            torch.autograd.grad(attn(q, k, v), (q, k, v), g_out)

    if cell.backend in SDPA_BACKENDS:
        call, glb = "sdpa(q, k, v, **kw)", {"sdpa": F.scaled_dot_product_attention, "kw": _sdpa_kwargs(cell)}
    else:
        call, glb = "attn(q, k, v)", {"attn": attn}
    glb.update(q=q, k=k, v=v, g=g_out, grad=torch.autograd.grad)
    stmt = f"grad({call}, (q, k, v), g)" if grad else call
    return Prepared(step, forward, context, None if cell.backend == "math" else reference, stmt, glb)
