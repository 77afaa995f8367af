"""The kernel reading (reading/section.py) as terminal lines: per layer type x implementation, its
slowest layer's kernels with their fingerprints and occupancy, then why not flash."""

from __future__ import annotations

from typing import Any

from ..format.report.layers import KernelOccupancy, WhyNotFlash
from ..text.words import cut

GROUPS = 4  # layer type x implementation groups shown
KERNELS = 4  # kernels per group


def _short(name: str) -> str:
    """A kernel's name without the return type, anonymous namespaces and the argument list."""
    n = name[5:] if name.startswith("void ") else name
    n = n.replace("(anonymous namespace)::", "")
    return cut(n.split("(")[0] or n, 70)


def _occupancy(o: KernelOccupancy | None) -> str | None:
    if o is None:
        return None
    ach = f"; kineto est. achieved {o.achieved_pct:g}% (computed, not measured)" if o.achieved_pct is not None else ""
    return f"occupancy: {o.reading}{ach}"


def why_not_flash_lines(w: WhyNotFlash | None, indent: str = "    ") -> list[str]:
    if not w:
        return []
    states = []
    for b in w.backends:
        states.append(f"{b.backend} " + ("refused" if b.eligible is False else
                                         "eligible" if b.eligible else "unknown"))
    out = [f"{indent}why not flash ({w.device}; ran {w.ran or '?'}): " + ", ".join(states)]
    for b in w.backends:
        for x in b.refusals:
            out.append(f"{indent}  {b.backend}: {x.reason} -> {x.fix}  [{x.check}]")
    return out


def lines(r: dict[str, Any]) -> list[str]:
    reading = r.get("kernel_reading") or {}
    fps = reading.get("fingerprints") or {}
    seen = set()
    out: list[str] = []
    for lay in r.get("layers") or []:
        key = (lay.layer_type, lay.implementation)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > GROUPS:
            break
        out.append(f"  kernels of {cut(lay.layer_type, 48)} ({lay.implementation}), e.g. {cut(lay.layer, 40)}:")
        occ = {o.name: o for o in lay.occupancy}
        for k in lay.kernels[:KERNELS]:
            fp = fps.get(k.name) or {}
            out.append(f"    {_short(k.name)}")
            out.append(f"      {fp.get('summary') or 'unknown'}")
            o = _occupancy(occ.get(k.name))
            if o:
                out.append(f"      {o}")
            out.extend(f"      ! {f}" for f in fp.get("flags") or [])
        if not lay.kernels:
            out.append(f"    no GPU kernels: {'a CPU trace' if r.get('time_basis') == 'cpu' else 'none joined its calls'}, "
                       "so no fingerprints or occupancy")
        out.extend(why_not_flash_lines(lay.why_not_flash))
        if lay.why_not_flash is None and lay.why_not_flash_unknown:
            out.append(f"    why not flash: {lay.why_not_flash_unknown}")
    if out and reading.get("occupancy", "").startswith("unknown"):
        out.append(f"  occupancy {reading['occupancy']}")
    return [""] + out if out else []
