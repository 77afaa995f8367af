"""Matmul-like ops as data: which argument of each op is the left operand, the right one and the bias.

The score path (detect.py) asks one question of a matmul-like op: what product did it compute, as
``[.., M, K] x [.., K, N] -> [.., M, N]``. A QK^T is one whose output is the score [.., Lq, Lk]; an
AV is one that contracts over Lk with a [.., Lk, D] operand. Argument positions follow the ATen
signatures (native_functions.yaml); one row per op with a real example and where it was seen, so a
new op is a row, not a code path (docs/kernels.md lists them). tests/test_attention_path.py checks
every row against its example.
"""

from __future__ import annotations

from typing import Any

import msgspec


class OpRoles(msgspec.Struct, frozen=True):
    op: str
    left: int  # argument index of the [.., M, K] operand (-1: operands come from the equation)
    right: int  # argument index of the [.., K, N] operand
    bias: int  # argument index of the added input (baddbmm/addmm: a mask or bias), -1 none
    batched: bool  # False: 2-D only (heads flattened into rows), evidence only inside an attention scope
    example: str  # the recorded ``Input Dims`` of a real call
    source: str


def _r(op, left, right, bias, batched, example, source):
    return OpRoles(op, left, right, bias, batched, example, source)


OP_ROLES: tuple[OpRoles, ...] = (
    _r("aten::bmm", 0, 1, -1, True, "[[8, 24, 24], [8, 24, 16]]",
       "cpu: nn.MultiheadAttention slow path (F.multi_head_attention_forward: bmm(attn_weights, v)); trace: tl_h100_owlv2_eager_bmm_softmax"),
    _r("aten::baddbmm", 1, 2, 0, True, "[[1, 24, 24], [8, 24, 16], [8, 16, 24], [], []]",
       "cpu: nn.MultiheadAttention with attn_mask (baddbmm(attn_mask, q_scaled, k.transpose(-2, -1)): input is the mask)"),
    _r("aten::matmul", 0, 1, -1, True, "[[2, 4, 32, 16], [2, 4, 16, 32]]",
       "cpu: Hugging Face eager attention (torch.matmul(q, k.transpose(2, 3))), any rank, batch dims broadcast"),
    _r("aten::_bmm", 0, 1, -1, True, "[[8, 24, 24], [8, 24, 16]]", "source: ATen native_functions.yaml (_bmm(self, mat2, deterministic))"),
    _r("aten::einsum", -1, -1, -1, True, "[[], [[2, 4, 24, 16], [2, 4, 24, 16]], []]",
       "cpu: einsum('bhqd,bhkd->bhqk', q, k): the equation when Concrete Inputs holds it, else the aten::bmm it lowers to"),
    _r("aten::mm", 0, 1, -1, False, "[[24, 16], [16, 24]]", "cpu: a per-head loop (q_h @ k_h.T), heads flattened into rows"),
    _r("aten::addmm", 1, 2, 0, False, "[[24], [24, 16], [16, 24], [], []]", "source: ATen native_functions.yaml (addmm(self, mat1, mat2)): self is the bias"),
)
ROLES: dict[str, OpRoles] = {r.op: r for r in OP_ROLES}

# Ops that are a whole attention (q, k, v in arguments 0, 1, 2): found by name (patterns.ATTENTION_OPS),
# listed here for the table in docs/kernels.md.
WHOLE_ATTENTION_ROLES: tuple[tuple[str, str, str], ...] = (
    ("aten::_scaled_dot_product_*", "q=0, k=1, v=2, attn_mask=3 (flash: none)", "source: ATen native_functions.yaml"),
    ("aten::_native_multi_head_attention", "query=0, key=1, value=2, embed_dim=3, heads=4, mask=9",
     "source: ATen native_functions.yaml (nn.MultiheadAttention fast path)"),
)


class Product(msgspec.Struct, frozen=True):
    """One matmul as ``[.., m, k] x [.., k, n] -> [.., m, n]``; ``out`` is the whole output shape."""
    m: int
    k: int
    n: int
    out: tuple[int, ...]
    left_batch: int  # batch elements of each operand (the product of its leading dims): a K/V with
    right_batch: int  # fewer heads than Q is broadcast (MQA/GQA)


_INT = {int}


def _shape(x: Any) -> list[int] | None:
    if type(x) is list and x and set(map(type, x)) == _INT and min(x) >= 0 and max(x) < (1 << 40):
        return x
    return None


def _prod(xs) -> int:
    p = 1
    for v in xs:
        p *= v
    return p


def product(op: str, dims: list[Any] | None, concrete: list[Any] | None = None) -> Product | None:
    """The product op ``op`` computed, from its recorded ``Input Dims`` (None when they do not say)."""
    row = ROLES.get(op)
    if row is None or not dims:
        return None
    if row.left < 0:
        return _einsum(dims, concrete)
    a = _shape(dims[row.left]) if row.left < len(dims) else None
    b = _shape(dims[row.right]) if row.right < len(dims) else None
    if a is None or b is None or len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    if not row.batched and (len(a) != 2 or len(b) != 2):
        return None
    batch = a[:-2] if len(a) >= len(b) else b[:-2]
    return Product(a[-2], a[-1], b[-1], tuple(batch) + (a[-2], b[-1]), _prod(a[:-2]), _prod(b[:-2]))


def parse_equation(eq: str) -> tuple[str, str, str] | None:
    """'bhqd,bhkd->bhqk' -> ('bhqd', 'bhkd', 'bhqk'); None for anything but a two-operand equation."""
    eq = eq.replace(" ", "")
    if eq.count("->") != 1:
        return None
    ins, out = eq.split("->")
    parts = ins.split(",")
    if len(parts) != 2 or not all(p.isalpha() for p in parts) or not (out.isalpha() or out == ""):
        return None
    return parts[0], parts[1], out


def _einsum(dims: list[Any], concrete: list[Any] | None) -> Product | None:
    eq = concrete[0] if concrete and isinstance(concrete[0], str) else ""
    parsed = parse_equation(eq) if eq else None
    ops = dims[1] if len(dims) > 1 and isinstance(dims[1], list) else None
    if parsed is None or not ops or len(ops) != 2:
        return None  # the equation is not recorded (torch 2.x records no strings): the caller asks the bmm
    (sa, sb, so), (a, b) = parsed, (_shape(ops[0]), _shape(ops[1]))
    if a is None or b is None or len(a) != len(sa) or len(b) != len(sb):
        return None
    size = dict(zip(sa, a)) | dict(zip(sb, b))
    contracted = [c for c in sa if c in sb and c not in so]
    if len(contracted) != 1 or len(so) < 2:
        return None
    m_idx, n_idx = so[-2], so[-1]
    if m_idx not in sa or n_idx not in sb:
        return None
    batch = [c for c in so[:-2]]
    return Product(size[m_idx], size[contracted[0]], size[n_idx], tuple(size[c] for c in so),
                   _prod(size[c] for c in batch if c in sa), _prod(size[c] for c in batch if c in sb))


def product_at(L, i: int) -> Product | None:
    """The product op ``i`` of a linked trace computed. An einsum whose equation the trace lacks is
    read from the batched matmul it lowers to (its first ``aten::bmm`` child with shapes)."""
    name = L.names[i]
    if name not in ROLES:
        return None
    a = L.args(i)
    p = product(name, a.dims, a.concrete) if a is not None else None
    if p is None and name == "aten::einsum":
        for j in range(i + 1, L.subtree_end[i]):
            if L.names[j] == "aten::bmm":
                b = L.args(j)
                return product("aten::bmm", b.dims) if b is not None else None
    return p


def recorded(L, i: int) -> bool:
    """Whether op ``i`` has recorded shapes at all (without them, a batched op's name is trusted)."""
    a = L.args(i)
    dims = a.dims if a is not None else None
    return bool(dims) and len(dims) >= 2


def batched(L, i: int) -> bool:
    """Whether op ``i`` is a batched matmul-like op: its product has batch dims, or the trace kept no
    shapes and its row is a batched op (the name is trusted then)."""
    row = ROLES.get(L.names[i])
    if row is None:
        return False
    a = L.args(i)
    dims = a.dims if a is not None else None
    if not dims or len(dims) < 2:
        return row.batched  # no shapes recorded: the name is trusted
    if row.left >= 0:  # both matrices batched (rank 3 or more), as the op's row names them
        if not row.batched or max(row.left, row.right) >= len(dims):
            return False
        x, y = dims[row.left], dims[row.right]
        return type(x) is list and type(y) is list and len(x) >= 3 and len(y) >= 3
    p = product_at(L, i)
    return p is not None and len(p.out) >= 3


def operands(L, i: int) -> tuple[list[Any], list[Any]] | None:
    """(Input Dims, Input type) of op ``i``'s two matrix operands in [left, right] order (an
    einsum's: its batched matmul's), or None."""
    name = L.names[i]
    row = ROLES.get(name)
    if row is None:
        return None
    if row.left < 0:
        for j in range(i + 1, L.subtree_end[i]):
            if L.names[j] == "aten::bmm":
                i, row = j, ROLES["aten::bmm"]
                break
        else:
            return None
    a = L.args(i)
    dims, types = (a.dims, a.types) if a is not None else (None, None)
    if not dims or len(dims) <= max(row.left, row.right):
        return None
    t = [types[row.left], types[row.right]] if types and len(types) > max(row.left, row.right) else None
    return [dims[row.left], dims[row.right]], t
