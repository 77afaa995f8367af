"""Writes frontend/test/fixtures/sweep_cpu.json: tests/sweep_data.py's real CPU sweep as the real
TensorBoard app's /sweep answer. Run from the repository root: python tests/make_sweep_fixture.py"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "frontend" / "test" / "fixtures" / "sweep_cpu.json"


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.conftest import make_tb_app, wait_runs
    from tests.sweep_data import record_sweep

    root = Path(tempfile.mkdtemp())
    records = record_sweep(root / "cpu_sweep")
    client, plugins = make_tb_app(root, Path(tempfile.mkdtemp()))
    try:
        profiles = {f"cpu_sweep/{r['profile_run']}" for r in records if r.get("profile_run")}
        wait_runs(client, lambda d: profiles <= {r["run"] for r in d["runs"]})
        doc = json.loads(client.get("/data/plugin/tb_attn/sweep?run=cpu_sweep").data)
    finally:
        plugins["tb_attn"].close()
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT}: {len(doc['cells'])} cells, {doc['analysis']['status_counts']}")


if __name__ == "__main__":  # the sweep's --memory-cap child is spawned: it re-imports this file
    main()
