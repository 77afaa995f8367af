"""The per-cell numbers that torch.utils.benchmark's Compare table leaves out (IQR, TFLOP/s, % of
peak, tokens/s, peak memory, error against math), as a plain terminal table (no torch)."""

from __future__ import annotations

from typing import Any

from ..text.units import duration_text, flops_rate_text
from .analysis import series_name

COLUMNS = ("backend", "B", "L", "median", "IQR", "FLOP rate", "% peak", "tokens/s", "peak mem", "max |err|")


def _seconds(v: Any) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    return duration_text(v * 1e6, 3)


def _rate(v: Any) -> str:
    """A FLOP rate given in TFLOP/s in the unit that reads ('95.4 MFLOP/s', never 'TFLOP/s 9.54e-05')."""
    return flops_rate_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _bytes(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= f:
            return f"{v / f:.3g} {unit}"
    return f"{int(v)} B"


def _count(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    for unit, f in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= f:
            return f"{v / f:.3g}{unit}"
    return f"{v:.3g}"


def _num(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def row(rec: dict[str, Any]) -> list[str]:
    return [series_name(rec), str(rec["batch"]), str(rec["seq_len"]), _seconds(rec.get("median_s")),
            _seconds(rec.get("iqr_s")), _rate(rec.get("tflops")), _num(rec.get("pct_of_peak"), ".1f"),
            _count(rec.get("tokens_per_s")), _bytes(rec.get("peak_bytes")), _num(rec.get("max_abs_error"), ".2g")]


def metrics_table(records: list[dict[str, Any]]) -> str:
    """One line per measured (``ok``) cell, in the records' order; '' when none was measured. The
    % of peak column is left out when no cell has one."""
    rows = [row(r) for r in records if r.get("status") == "ok"]
    if not rows:
        return ""
    cols = list(COLUMNS)
    pct = cols.index("% peak")
    if all(r[pct] == "-" for r in rows):  # no peak known (a CPU, float32, a GPU missing from the table)
        cols.pop(pct)
        rows = [r[:pct] + r[pct + 1:] for r in rows]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    left = {0}  # the backend's name reads left-aligned, numbers right-aligned

    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in rows])
