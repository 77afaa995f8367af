"""A torchrun-style run: two CPU ranks (gloo), one trace per rank, distinct worker names."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from tb_attn_plugin.ranks.identify import rank_of  # noqa: E402
from tb_attn_plugin.ranks.summary import summarize_ranks  # noqa: E402
from tb_attn_plugin.report.build import analyze_file  # noqa: E402
from tb_attn_plugin.trace.discover import find_traces  # noqa: E402

WORKER = r"""
import sys, torch, torch.distributed as dist
sys.path.insert(0, sys.argv[2])
import tb_attn_plugin
from tests.cpu_models import B, D, L, model
dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
m, x = model("sdpa"), torch.randn(B, L, D)
with tb_attn_plugin.profile(sys.argv[1], model=m, variant="ddp",
                            schedule=torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
    for _ in range(2):
        loss = m(x).sum()
        loss.backward()
        for p in m.parameters():  # what DDP does: average gradients over ranks
            dist.all_reduce(p.grad)
        prof.step()
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_write_one_trace_each(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run = tmp_path / "run"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
           f"--master-port={_free_port()}", "--master-addr=127.0.0.1", str(script), str(run), repo]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    traces = find_traces(str(run))
    workers = sorted(t.worker for t in traces)
    assert len(traces) == 2 and len(set(workers)) == 2, workers
    assert workers[0].endswith("_rank0") and workers[1].endswith("_rank1")
    reports = []
    for t in traces:
        report = analyze_file(t.path)
        assert report["calls"] == 2
        assert report["metadata"]["world_size"] == 2
        rank = int(t.worker.rsplit("rank", 1)[1])
        assert report["metadata"]["rank"] == rank
        # kineto wrote distributedInfo into the real trace: the rank view takes the rank from there.
        assert rank_of(report) == (rank, 2, "distributedInfo")
        reports.append(report)
    doc = summarize_ranks(reports)
    assert doc["rank_count"] == 2 and doc["world_size"] == 2 and doc["missing_count"] == 0
    assert {r["rank_from"] for r in doc["ranks"]} == {"distributedInfo"} and doc["imbalance"] >= 1.0
