"""Which layer of one run is which layer of another: by name (a module path names a layer the same
way in every variant of a model), then by position and shape (a compiled run's ``cpu_fused#0`` is the
first attention layer of its query/key length, heads and head size, as ``model.blocks.0.attn`` is)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping, Sequence

from ..format.report.layers import Layer

_DIGITS = re.compile(r"(\d+)")
# Names the engine makes up when nothing names a layer (attention/naming.py name_calls): "eager#0".
_ORDINAL = re.compile(r"#\d+$")


def natural_key(name: str) -> list:
    """blocks.2 before blocks.10: numbers compare as numbers."""
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(name)]


def _shape_of(layer: Layer) -> tuple | None:
    s = layer.shape
    if s is None:
        return None
    sig = (s.q_len, s.k_len, s.q_heads, s.head_dim)
    return sig if all(isinstance(v, int) for v in sig) else None


def _informative(name: str) -> tuple:
    """Which of two names for one layer to show: a module path over a made-up ordinal."""
    return (bool(_ORDINAL.search(name)), "." not in name, name)


def match_layers(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """For each report, {layer name: the name of the layer it pairs with across the runs}."""
    runs: list[list[Layer]] = [r.get("layers") or [] for r in reports]
    seen_in = Counter(name for names in ({lay.layer for lay in layers} for layers in runs) for name in names)
    slot: list[dict[str, tuple]] = []  # per run: name -> (shape, its position among the run's layers of that shape)
    for layers in runs:
        by_shape: dict[tuple, list[str]] = {}
        for lay in layers:
            sig = _shape_of(lay)
            if sig is not None:
                by_shape.setdefault(sig, []).append(lay.layer)
        slot.append({n: (sig, i) for sig, names in by_shape.items() for i, n in enumerate(sorted(names, key=natural_key))})
    members: dict[tuple, list[str]] = {}
    for names in slot:
        for n, s in names.items():
            members.setdefault(s, []).append(n)
    out = []
    for layers, names in zip(runs, slot):
        own = {lay.layer for lay in layers}
        keys = {}
        for lay in layers:
            name = lay.layer
            if seen_in[name] >= 2 or name not in names:
                keys[name] = name
                continue
            at = members[names[name]]
            shared = Counter(n for n in at if seen_in[n] >= 2)
            key = shared.most_common(1)[0][0] if shared else min(at, key=_informative)
            # never two layers of one run under one key: a name the run has itself stays that layer's
            keys[name] = name if key != name and key in own else key
        out.append(keys)
    return out


def layer_types(reports: Sequence[Mapping[str, Any]], keys: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The layer type each matched key is shown as: that of the layer named like the key."""
    out: dict[str, str] = {}
    for r, k in zip(reports, keys):
        for lay in r.get("layers") or []:
            name = lay.layer
            if k.get(name) == name:
                out.setdefault(name, lay.layer_type or name)
    return out
