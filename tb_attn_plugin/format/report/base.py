"""Shared pieces of the report's Structs: the base class, value types and the peaks by precision."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .. import tags


class Row(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every part of the report: unknown keys are errors, optional keys are left out when unset."""


def doc(text: str) -> Meta:
    """The description of a field (in the schema and as the TS field's comment)."""
    return Meta(description=text)


Pass = Literal["fwd", "bwd"]
Basis = Literal["gpu", "cpu"]
Stage = Literal[tags.STAGES]  # type: ignore[valid-type]  # the tag format's stages, in its order
CoreStage = Literal[tags.CORE_STAGES]  # type: ignore[valid-type]  # the attention core's stages
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
Count = Annotated[int, Meta(ge=0)]
NonNeg = Annotated[float, Meta(ge=0)]
Positive = Annotated[int, Meta(ge=1)]

# Literal types the TypeScript side names (tags.ts exports them; the frontend imports them).
TS_ALIASES: dict[str, Any] = {"Pass": Pass, "Basis": Basis, "Stage": Stage, "CoreStage": CoreStage}
# Constant lists the TypeScript side needs in order (tags.ts exports them as `const NAME = [...] as const`).
TS_CONSTANTS: dict[str, Any] = {"STAGES": Stage}


class Tflops(Row, kw_only=True):
    """Peak TFLOP/s by precision; null: the datasheet gives none for it."""
    fp32: float | None | UnsetType = UNSET
    tf32: float | None | UnsetType = UNSET
    bf16: float | None | UnsetType = UNSET
    fp16: float | None | UnsetType = UNSET
    fp8: float | None | UnsetType = UNSET
