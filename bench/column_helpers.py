"""Time spent in table/columns.py's helpers during one full analysis, in process: each helper is
wrapped with a clock, the trace analysed three times, the best total and the last run's per-helper
seconds printed. Run it with two checkouts on PYTHONPATH in turn to compare their helpers.

    PYTHONPATH=. python bench/column_helpers.py /tmp/owlv2x4.json
"""

from __future__ import annotations

import functools
import sys
import time

from tb_attn_plugin.report import build
from tb_attn_plugin.table import columns

spent: dict[str, float] = {}


def _clocked(name: str) -> None:
    f = getattr(columns, name)

    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

    setattr(columns, name, g)


def main(path: str) -> None:
    for name in ("sums", "spans", "factorize", "positions", "pairs", "picked", "nonnegative", "masked_sums",
                 "byte_counts"):
        if hasattr(columns, name):
            _clocked(name)
    best = float("inf")
    for _ in range(3):
        spent.clear()
        t = time.perf_counter()
        build.analyze_file(path)
        best = min(best, time.perf_counter() - t)
    print(f"analysis {best:.3f} s (best of 3); helpers {sum(spent.values()):.3f} s:",
          {k: round(v, 4) for k, v in spent.items()})


if __name__ == "__main__":
    main(sys.argv[1])
