"""Attention found in a snapshot's stacks by what a function allocates, not by its name.

A Python function is attention when, in one invocation, it allocates a matmul's output, then a
softmax's (or an ``exp``'s, a softmax written out) of the same size (or twice or half: a cast to or
from float32), then another matmul's: QK^T, the probabilities, AV. That holds for a vendored
``model.py`` and for course code where every function is ``forward``, whatever the names.
The innermost such function is the one: a block that calls attention allocates the same pattern.

A function is told from another of the same name by where it was called from: its key is its
file and name with the frames that enclose it (the caller's line, and so on outward), as torch
records a frame only as ``{filename, line, name}`` (line: the line running in that frame).

The op of an allocation is the outermost op frame inside its innermost user frame
(``at::_ops::matmul`` around ``at::_ops::bmm``; ``softmax`` of torch/nn/functional.py); where
the stack has no op frame (``stacks="python"``: ``q @ k.T`` leaves none) it is unknown, which may
stand for a matmul but never for the softmax.
"""

from __future__ import annotations


from ..format.linear_regex import compile_linear
from . import frame_rules as R
from .rows import EntryRows
from .section import CUDA_BLOCK

# A module's forward is called through these frames (torch/nn/modules/module.py).
MODULE_CALL = compile_linear(r"torch/nn/modules/module\.py$")
# Generated code runs a whole compiled graph in one frame: never an attention function by itself.
GENERATED = compile_linear(r"torchinductor_|/torch/_inductor/|/torch/_dynamo/|/torch/_functorch/")
MATMUL_LIKE = ("matmul", None)  # None: no op frame (a Python operator such as @)
SOFTMAX_LIKE = ("softmax", "exp")


def _up(x: int) -> int:
    return -(-x // CUDA_BLOCK) * CUDA_BLOCK


def _same_matrix(a: int, b: int) -> bool:
    """Two block sizes of the same B·H·Lq·Lk matrix: equal, or one dtype twice as wide (rounded to blocks)."""
    return a == b or _up(a) == _up(b) or _up(a) == _up(2 * b) or _up(b) == _up(2 * a)


class Chain:
    """One stack's Python frames: (position in the stack, frame index, key), innermost first, and
    the allocation's op class, whether it runs in a backward, and its innermost user frame."""

    __slots__ = ("bwd", "named", "op", "py", "user")

    def __init__(self, py, op, bwd, user, named):
        self.py, self.op, self.bwd, self.user = py, op, bwd, user
        self.named = named  # stack position of the outermost frame a rule names attention, -1: none


class Stacks:
    """Per stack of ``rows``: its Chain; keys interned (a key: file, name, and the path of frames outward)."""

    def __init__(self, rows: EntryRows):
        self.rows = rows
        self.paths: dict[tuple[int, int], int] = {}  # (frame index, parent path) -> path id
        self.parent: list[int] = []  # path id -> parent path id (-1: outermost)
        self.frame_of: list[int] = []  # path id -> frame index
        self.cache: dict[int, Chain] = {}

    def _path(self, frame: int, parent: int) -> int:
        k = (frame, parent)
        p = self.paths.get(k)
        if p is None:
            p = self.paths[k] = len(self.parent)
            self.parent.append(parent)
            self.frame_of.append(frame)
        return p

    def key_of_path(self, p: int) -> tuple:
        fn, _, name = self.rows.frames[self.frame_of[p]]
        return fn, str(name), self.parent[p]

    def chain(self, s: int) -> Chain:
        got = self.cache.get(s)
        if got is not None:
            return got
        frames = self.rows.frames
        ids = self.rows.stacks[s]
        py: list[tuple[int, int]] = []
        ops: list[str] = []
        bwd = False
        user = named = -1
        for pos, k in enumerate(ids):
            fn, _, name = frames[k]
            m = R.match(fn or "", str(name or ""))
            if m is not None:
                if m[0] == R.ATTENTION:
                    named = pos
                elif m[0] in (R.NODE, R.BACKWARD):
                    bwd = True
                elif m[0] == R.OP and user < 0:
                    ops.append(m[1])
            if R.PYTHON_FILE.search(fn or ""):
                py.append((pos, k))
                if user < 0 and R.is_user_frame(fn):
                    user = len(py) - 1
                elif user < 0:
                    ops.append("aten")  # a torch function no row names (F.gelu, F.layer_norm): known, not a matmul
        known = [o for o in ops if o not in R.GENERIC_OPS]
        op = known[-1] if known else ("aten" if ops else None)
        # Paths from the outermost frame inward: a frame's key is its (file, name) and its parent's path.
        parent = -1
        paths = [0] * len(py)
        for u in range(len(py) - 1, -1, -1):
            parent = paths[u] = self._path(py[u][1], parent)
        keyed = tuple((pos, k, self.key_of_path(paths[u])) for u, (pos, k) in enumerate(py))
        got = self.cache[s] = Chain(keyed, op, bwd, user, named)
        return got

    def loose(self, key: tuple) -> tuple:
        """A key by its file, name and the line that called it (the first caller outside nn.Module's
        call frames): a compiled backward carries the forward's source frames, under other callers."""
        p = key[2]
        while p >= 0:
            fn, line, _ = self.rows.frames[self.frame_of[p]]
            if not MODULE_CALL.search(fn or ""):
                return key[0], key[1], fn, line
            p = self.parent[p]
        return key[0], key[1], None, None

    def nested(self, inner: tuple, outer: tuple) -> bool:
        """Whether the function of key ``inner`` runs inside that of key ``outer``."""
        p = inner[2]
        while p >= 0:
            f = self.rows.frames[self.frame_of[p]]
            if (f[0], str(f[2])) == outer[:2] and self.parent[p] == outer[2]:
                return True
            p = self.parent[p]
        return False


def candidate(key: tuple) -> bool:
    fn = key[0]
    return R.is_user_frame(fn) and not GENERATED.search(fn)


LINE_GAP = 25  # lines: a function's allocating lines lie closer together than two functions of one file


def find(stacks: Stacks, tl, entry_ix) -> dict[tuple, tuple[int, int]]:
    """The functions whose invocations allocate QK^T, a softmax of its size, then AV: their keys,
    each with the span of its own lines. An invocation: a run of forward allocations whose stacks
    hold the function's key. The span: the lines that allocated under that key, from the pattern's
    lines outward while they lie within LINE_GAP of each other, since two functions of one file
    called from one line (nanoGPT's ``self.attn(self.ln_1(x))``: both ``forward``) share a key."""
    rows = stacks.rows
    stack_col = rows.stack
    if not len(stack_col):
        return {}
    delta = tl.delta
    frames = rows.frames
    # key -> [{matmul size: its line}, (QK^T line, softmax line) of the latest softmax of a matmul's size]
    active: dict[tuple, list] = {}
    found: dict[tuple, set] = {}  # key -> the pattern's lines
    covers: set[tuple] = set()  # functions that call one a rule names attention: names come first
    seen: set[int] = set()  # the forward allocations' stacks
    per_stack: dict[int, tuple] = {}  # stack -> (its candidate keys with their lines, their set, the op's role)
    for i in range(len(tl)):
        d = delta[i]
        if d <= 0:
            continue
        s = stack_col[entry_ix[i]]
        if s < 0:
            continue
        got = per_stack.get(s)
        if got is None:
            ch = stacks.chain(s)
            # A stack a rule already names attention needs no structure (its outer functions call
            # attention: they are not it).
            keyed = () if ch.bwd or ch.named >= 0 else \
                tuple((key, _line(frames[k][1])) for _, k, key in ch.py if candidate(key))
            if ch.named >= 0 and not ch.bwd:
                covers.update(key for pos, _, key in ch.py if pos > ch.named)
            role = 1 if ch.op in MATMUL_LIKE else 2 if ch.op in SOFTMAX_LIKE else 0
            got = per_stack[s] = (keyed, frozenset(key for key, _ in keyed), role, ch.bwd)
        keyed, here, role, bwd = got
        if bwd:
            continue
        seen.add(s)
        if active and not here.issuperset(active):
            for k in active.keys() - here:
                del active[k]
        if not role:
            continue
        for key, line in keyed:
            if key in found:
                continue  # its pattern's lines are known
            st = active.get(key)
            if st is None:
                st = active[key] = [{}, None]
            mm, armed = st
            if role == 1:
                if armed is not None:
                    found.setdefault(key, set()).update(armed + (line,))
                mm[d] = line
            else:
                hit = next((ln for s0, ln in mm.items() if _same_matrix(d, s0)), None) if len(mm) < 64 else \
                    mm.get(d, mm.get(d // 2, mm.get(d * 2)))
                if hit is not None:
                    st[1] = (hit, line)
    lines: dict[tuple, set] = {}  # key -> every line that allocated under it
    for s in seen:
        for key, line in per_stack[s][0]:
            lines.setdefault(key, set()).add(line)
    keys = [k for k in found if k not in covers]
    # The innermost: a function that calls an attention function is not attention itself.
    keys = [k for k in keys if not any(o != k and stacks.nested(o, k) for o in keys)]
    return {k: span(found[k], lines[k]) for k in keys}


def _line(x) -> int | None:
    """A frame's line as a number (an untrusted record may hold anything there)."""
    return x if type(x) is int else None


def span(pattern: set, seen: set) -> tuple[int, int]:
    """The lines of one function among those under its key: from ``pattern``'s lines outward through
    ``seen`` while they lie within LINE_GAP (two functions of one file may share a key)."""
    ints = sorted(x for x in seen if type(x) is int)
    core = [x for x in pattern if type(x) is int]
    if not core or not ints:
        return (-(1 << 62), 1 << 62)  # no line numbers: the whole key
    lo, hi = min(core), max(core)
    for x in reversed(ints):  # outward from the pattern while the lines stay close
        if lo - LINE_GAP <= x < lo:
            lo = x
    for x in ints:
        if hi < x <= hi + LINE_GAP:
            hi = x
    return lo, hi
