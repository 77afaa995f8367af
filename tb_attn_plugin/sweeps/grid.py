"""The sweep's grid: parsing ``128,512`` and ``128:8192:x2`` lists, and the cells they make (no torch)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import msgspec

BACKENDS = ("math", "flash", "efficient", "cudnn", "flex", "eager")
DTYPES = ("bfloat16", "float16", "float32")
PASSES = ("fwd", "fwd+bwd")
DEVICES = ("cpu", "cuda")
MAX_CELLS = 10_000  # a grid this big is a typo (a range with a step of x1.0001), not an experiment
_RANGE = re.compile(r"(\d+):(\d+):(x|\+)?(\d+)")


class GridError(ValueError):
    """A sweep argument that cannot be used; str() is the one line shown to the user."""


def parse_ints(text: str, what: str, *, minimum: int = 1) -> list[int]:
    """``"128,512"`` or ``"128:1024:x2"`` (geometric) or ``"128:1024:+128"`` / ``"128:1024:128"``
    (arithmetic), mixed freely with commas; sorted, duplicates dropped."""
    if not isinstance(text, str) or not text.strip():
        raise GridError(f"--{what}: empty; give numbers like 128,512 or a range like 128:8192:x2")
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if part.isdigit():
            out.add(int(part))
            continue
        m = _RANGE.fullmatch(part)
        if not m:
            raise GridError(f"--{what}: {part!r} is neither a number nor a range "
                            "START:STOP:xFACTOR or START:STOP:+STEP")
        start, stop, kind, step = int(m[1]), int(m[2]), m[3] or "+", int(m[4])
        if stop < start:
            raise GridError(f"--{what}: range {part!r} ends before it starts")
        if (kind == "x" and step < 2) or step < 1:
            raise GridError(f"--{what}: range {part!r} needs a factor of at least x2 or a step of at least +1")
        v = start
        while v <= stop:
            out.add(v)
            if len(out) > MAX_CELLS:
                raise GridError(f"--{what}: range {part!r} has more than {MAX_CELLS} values")
            v = v * step if kind == "x" else v + step
            if v == 0:
                break
    bad = sorted(v for v in out if v < minimum)
    if bad:
        raise GridError(f"--{what}: {bad[0]} is too small (at least {minimum})")
    return sorted(out)


def parse_names(text: str | list[str], what: str, allowed: tuple[str, ...]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item not in allowed:
            raise GridError(f"--{what}: unknown {what.rstrip('s')} {item!r}; expected any of {','.join(allowed)}")
        if item not in out:
            out.append(item)
    if not out:
        raise GridError(f"--{what}: empty; expected any of {','.join(allowed)}")
    return out


class Cell(msgspec.Struct, frozen=True):
    """One measurement: everything that decides the number, so that a rerun can recognise it."""

    backend: str
    batch: int
    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool
    pass_: str
    device: str
    module: str | None = None  # "pkg.mod:factory" when backend == "module"

    @classmethod
    def from_key(cls, key: dict[str, Any]) -> "Cell":
        """The cell of a record (or of key()): its identifying fields, ``pass`` as ``pass_``."""
        names = [f for f in cls.__struct_fields__]
        return cls(**{f: key.get("pass" if f == "pass_" else f) for f in names})

    def key(self) -> dict[str, Any]:
        d = msgspec.structs.asdict(self)
        d["pass"] = d.pop("pass_")
        return d

    @property
    def cell_id(self) -> str:
        """A short, path-safe name: readable parts plus a hash of everything (for profile runs and HParams)."""
        name = self.backend if self.module is None else "module-" + re.sub(r"[^A-Za-z0-9]+", "_", self.module)[-40:]
        import hashlib  # here: OpenSSL's load (~3 ms) only when a sweep names its cells

        digest = hashlib.sha1(json.dumps(self.key(), sort_keys=True).encode()).hexdigest()[:8]
        return f"{name}-b{self.batch}-L{self.seq_len}-{digest}"


def cell_key(record: dict[str, Any]) -> tuple:
    """What identifies a cell in sweep.jsonl (a record or Cell.key())."""
    return tuple(record.get(k) for k in ("backend", "batch", "seq_len", "heads", "kv_heads", "head_dim", "dtype",
                                         "causal", "pass", "device", "module"))


class Grid(msgspec.Struct):
    backends: list[str]
    seq_lens: list[int]
    batches: list[int]
    heads: int = 16
    head_dim: int = 64
    kv_heads: int | None = None
    dtype: str = "bfloat16"
    causal: bool = False
    pass_: str = "fwd"
    device: str = "cpu"
    modules: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.heads < 1 or self.head_dim < 1:
            raise GridError("--heads and --head-dim must be at least 1")
        kv = self.heads if self.kv_heads is None else self.kv_heads
        if kv < 1 or self.heads % kv:
            raise GridError(f"--kv-heads {kv} must divide --heads {self.heads} (grouped-query attention)")
        self.kv_heads = kv
        if self.dtype not in DTYPES:
            raise GridError(f"--dtype: unknown {self.dtype!r}; expected one of {','.join(DTYPES)}")
        if self.pass_ not in PASSES:
            raise GridError(f"--pass: unknown {self.pass_!r}; expected fwd or fwd+bwd")
        if self.device not in DEVICES:
            raise GridError(f"--device: unknown {self.device!r}; expected cpu or cuda")
        for m in self.modules:
            if not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", m):
                raise GridError(f"--module: {m!r} is not of the form package.module:factory")
        if not self.backends and not self.modules:
            raise GridError("nothing to sweep: give --backends and/or --module")
        n = len(self.cells_list())
        if n > MAX_CELLS:
            raise GridError(f"the grid has {n} cells, more than {MAX_CELLS}")

    def cells(self) -> Iterator[Cell]:
        """Lengths outermost, then batches, then backends: every backend of one shape is measured on
        the same inputs one after another, and an OOM boundary is met in order of growing length."""
        for L in self.seq_lens:
            for b in self.batches:
                for backend in self.backends:
                    yield Cell(backend, b, L, self.heads, int(self.kv_heads), self.head_dim, self.dtype, self.causal,
                               self.pass_, self.device)
                for m in self.modules:
                    yield Cell("module", b, L, self.heads, int(self.kv_heads), self.head_dim, self.dtype, self.causal,
                               self.pass_, self.device, m)

    def cells_list(self) -> list[Cell]:
        return list(self.cells())


def parse_bytes(text: str, what: str = "memory-cap") -> int:
    """``"512M"``, ``"2GiB"``, ``"1.5G"``, ``"1000000"`` -> bytes (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise GridError(f"--{what}: {text!r} is not a size like 512M or 2G")
    n = float(m[1]) * 1024 ** " KMGT".index((m[2] or " ").upper())
    if n < 1:
        raise GridError(f"--{what}: {text!r} is zero")
    return int(n)
