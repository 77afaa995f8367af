"""The last guard before a report leaves the engine: a number that is not finite becomes null, with a warning.

Strict JSON has no NaN or Infinity (clients reject the document), and 0 would be a confident wrong
answer; the sources of such numbers are fixed where they arise (attention/shapes.py, text/units.py),
so this only catches what a future path lets through, and says where."""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

MAX_NAMED = 5  # places named in the warning; the count covers the rest
# msgpack writes every float as 0xcb and its 8 bytes big-endian: a NaN or infinity has all exponent
# bits set (first byte 0x7f or 0xff, second 0xf0 or more). Such bytes elsewhere (inside an int, a key)
# only cost the walk; a non-finite float cannot hide from the search.
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")
_PACK = msgspec.msgpack.Encoder()


def scrub(report: dict[str, Any]) -> list[str]:
    """Replace every NaN/±inf in ``report`` (in place) by None; add one warning naming where; return the places."""
    found: list[str] = []
    if _may_hold_non_finite(report):
        _walk(report, "", found)
    if found:
        more = f" and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
        report.setdefault("warnings", []).append(
            f"{len(found)} numbers were not finite (NaN or infinity) and are shown as unknown: "
            f"{', '.join(found[:MAX_NAMED])}{more}")
    return found


def _may_hold_non_finite(report: dict[str, Any]) -> bool:
    """False only when no float in the report is NaN or infinite: one C-level encoding and byte
    search, so the walk runs only for a report that needs it (or that msgpack cannot encode)."""
    try:
        packed = _PACK.encode(report)
    except Exception:
        return True
    return _NON_FINITE.search(packed) is not None


def _walk(x: Any, where: str, found: list[str]) -> None:
    if isinstance(x, msgspec.Struct):  # a section's Struct (a Layer): its fields, named as the report writes them
        for f in msgspec.structs.fields(x):
            v = getattr(x, f.name)
            if isinstance(v, float) and not math.isfinite(v):
                setattr(x, f.name, None)
                found.append(f"{where}.{f.encode_name}" if where else f.encode_name)
            elif isinstance(v, (dict, list, msgspec.Struct)):
                _walk(v, f"{where}.{f.encode_name}" if where else f.encode_name, found)
        return
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        if isinstance(v, float) and not math.isfinite(v):
            x[k] = None
            found.append(f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}" if where else str(k))
        elif isinstance(v, (dict, list, msgspec.Struct)):
            _walk(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}" if where else str(k), found)
