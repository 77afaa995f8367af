"""A kernel name decoded into fields by the rules of fingerprint_rules.py, and the flags that follow from them."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .fingerprint_rules import FIELDS, RULES

_GROUP = re.compile(r"\{(\d+)\}")
_COMPILED = tuple((r.field, r.compiled(), r.value) for r in RULES)
_ARCH = re.compile(r"^(sm|gfx)(\d+)([a-f]?)$")
NAME_LIMIT = 4096  # the rules look at a name's first characters only: template arguments can run for pages


@lru_cache(maxsize=8192)
def decode(name: str) -> dict[str, str | None]:
    """Every field of FIELDS, None where no rule matched (unknown, never guessed)."""
    text = name[:NAME_LIMIT]
    out: dict[str, str | None] = dict.fromkeys(FIELDS)
    for field, rx, value in _COMPILED:
        if out[field] is not None:
            continue
        m = rx.search(text)
        if m is not None:
            out[field] = _GROUP.sub(lambda g: m.group(int(g.group(1))) or "", value)
    return out


def device_arch(device: dict[str, Any] | None) -> str | None:
    """The device's architecture as the kernel names spell it (sm90, gfx942), from the report's device."""
    if not device:
        return None
    cc = device.get("compute_capability")
    if device.get("vendor") == "AMD":
        gfx = device.get("gfx") or device.get("gcn_arch")
        if gfx:
            return str(gfx)
        if cc:  # ROCm writes gfx942 as computeMajor 9, computeMinor 4 (the stepping is lost)
            major, _, minor = str(cc).partition(".")
            return f"gfx{major}{minor}x"
        return None
    if cc:
        major, _, minor = str(cc).partition(".")
        return f"sm{major}{minor or '0'}"
    return None


def arch_key(arch: str | None) -> tuple[str, int] | None:
    """(family, comparable number): sm90 -> ('sm', 90); gfx942 and gfx94x -> ('gfx', 94)."""
    if not arch:
        return None
    m = _ARCH.match(arch.rstrip("x"))
    if m is None:
        return None
    fam, num = m.group(1), m.group(2)
    if fam == "gfx":
        num = num[:2]  # major and minor; the stepping digit is not comparable across reports
    return fam, int(num)


def flags(fp: dict[str, str | None], device_arch_name: str | None, stage: str | None = None) -> list[str]:
    """What a reader should notice in a fingerprint: FP32 matmuls on CUDA cores inside attention, and a
    kernel built for an older architecture than the device that ran it."""
    out = []
    unit = fp.get("math_unit") or ""
    if unit.startswith("CUDA cores") and fp.get("dtype") in ("fp32", "fp64"):
        where = f" in the {stage} stage" if stage and stage not in ("other", "fused") else ""
        out.append(f"{fp['dtype'].upper()} matmul on CUDA cores{where}: no tensor cores; bf16/fp16 inputs "
                   "(autocast) or a fused attention backend use them")
    k, d = arch_key(fp.get("arch")), arch_key(device_arch_name)
    if k and d and k[0] == d[0] and k[1] < d[1]:
        out.append(f"built for {fp['arch']}, ran on {device_arch_name}: the newer architecture's instructions "
                   "(e.g. wgmma/TMA on sm90) go unused")
    return out


def summary(fp: dict[str, str | None]) -> str:
    """One line: library · pass · dtype · math unit · tile · layout · arch · head dim · paging · causal · knob ·
    split (known fields only)."""
    parts = [fp.get("library"), fp.get("pass"), fp.get("dtype"), fp.get("math_unit"),
             f"tile {fp['tile']}" if fp.get("tile") else None, fp.get("layout"), fp.get("arch"),
             f"head dim {fp['head_dim']}" if fp.get("head_dim") else None, fp.get("paging"), fp.get("causal"),
             f"knob {fp['knob']}" if fp.get("knob") else None, fp.get("split")]
    return " · ".join(p for p in parts if p) or "unknown"


def key(fp: dict[str, str | None]) -> tuple:
    """What identifies a kernel across runs apart from its tile and dtype: library, pass, math family, arch."""
    unit = (fp.get("math_unit") or "").split(" (")[0]
    return fp.get("library"), fp.get("pass"), unit, fp.get("layout")
