"""Writes frontend/test/fixtures/call_phases.json: the real TensorBoard app's /call answers for one call of
each serving phase (decode, prefill, mixed) of tests/test_phases_serving.py's built vLLM FA2 trace (READ_BATCHES,
_served_call), and one call of an all-decode trace (one phase: the reading is not split). Run from the
repository root: python tests/make_call_phases_fixture.py"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "frontend" / "test" / "fixtures" / "call_phases.json"
SPAN = "1700000000000000000"  # tests/test_browser.py's span


def write_serving_logdir(logdir: Path) -> None:
    """Two runs: ``served`` (six layers: three decode batches, two prompts, one chunked prefill beside decodes)
    and ``decode_only`` (three decode batches)."""
    from tests.kernel_traces import TraceBuilder
    from tests.test_phases_serving import READ_BATCHES, _served_call

    for run, batches in (("served", READ_BATCHES), ("decode_only", [[1] * 8] * 3)):
        b = TraceBuilder()
        for i, qlens in enumerate(batches):
            _served_call(b, i, qlens)
        (logdir / run).mkdir(parents=True)
        b.write(logdir / run / f"host_1.{SPAN}.pt.trace.json")
    for p in logdir.rglob("*"):
        os.utime(p, (1_600_000_000, 1_600_000_000))  # settled: analysed at once


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.conftest import all_settled, make_tb_app, wait_runs

    root = Path(tempfile.mkdtemp())
    write_serving_logdir(root)
    client, plugins = make_tb_app(root, Path(tempfile.mkdtemp()))
    answers = []
    try:
        wait_runs(client, lambda d: all_settled(d, ["served", "decode_only"]))
        for run in ("served", "decode_only"):
            report = json.loads(client.get(f"/data/plugin/tb_attn/report?run={run}").data)
            picked: dict[str, int] = {}
            for s in report["call_samples"]:
                picked.setdefault(s["phase"], s["id"])
            for phase, cid in picked.items():
                doc = json.loads(client.get(f"/data/plugin/tb_attn/call?run={run}&id={cid}").data)
                answers.append({"run": run, "answer": doc})
    finally:
        plugins["tb_attn"].close()
    OUT.write_text(json.dumps(answers, indent=1) + "\n")
    print(f"{OUT}: {[(a['run'], a['answer']['id'], a['answer']['reading']['phase']) for a in answers]}")


if __name__ == "__main__":
    main()
