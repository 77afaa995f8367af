"""Shared fixtures: the real GPU traces in ../shared/traces and CPU traces recorded here with torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("TB_ATTN_SHARED_TRACES", REPO.parent / "shared" / "traces"))


def shared_trace(name: str) -> Path:
    p = SHARED_TRACES / f"{name}.json.gz"
    if not p.exists():
        pytest.skip(f"shared trace {p} not present")
    return p


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} not present")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory) -> dict[str, Path]:
    """Training steps (forward and backward) of small models, profiled with plain torch.profiler."""
    pytest.importorskip("torch")
    from tests.cpu_models import record_all

    return record_all(tmp_path_factory.mktemp("cpu_traces"))


# --- TensorBoard plugin fixtures (tests/test_plugin*.py) -------------------------------------

# Real traces laid out as tensorboard_trace_handler writes them: {logdir}/{run}/{worker}.{span}.pt.trace.json.gz
PLUGIN_RUNS = {
    "bert_flash": "tl_h100_bert_small_sdpa_flash",
    "bert_aotriton": "tl_mi300x_bert_small_sdpa_aotriton",
    "owlv2_eager": "tl_h100_owlv2_eager_bmm_softmax",
    "negative": "hta_a100_negative_log_softmax_fwdbwd",
    "group/compiled": "tl_mi300x_torch_compile_small",
}
# Inputs that must fail alone, with a message, while every other run keeps working.
PLUGIN_BAD_RUNS = {
    "bad/corrupt": b"\x1f\x8b\x08\x00garbage that is not deflate data at all" * 20,
    "bad/empty": b"",
    "bad/not_a_trace": b'{"hello": "world", "numbers": [1, 2, 3]}',
    "bad/not_json": b"this is plain text, not JSON\n",
}
OLD = 1_600_000_000  # mtime for fixture files: long settled, so analysis starts at once


def _place(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    os.utime(dst, (OLD, OLD))


@pytest.fixture(scope="session")
def plugin_logdir(tmp_path_factory, shared_traces) -> Path:
    """A logdir of real runs, one multi-worker multi-span run, nested runs and bad runs."""
    root = tmp_path_factory.mktemp("logdir")
    for run, name in PLUGIN_RUNS.items():
        _place(root / run / "host_1.1700000000000000001.pt.trace.json.gz", (shared_traces / f"{name}.json.gz").read_bytes())
    small = (shared_traces / "tl_mi300x_torch_compile_small.json.gz").read_bytes()
    bert = (shared_traces / "tl_mi300x_bert_small_sdpa_aotriton.json.gz").read_bytes()
    _place(root / "multi" / "rank0.100.pt.trace.json.gz", small)
    _place(root / "multi" / "rank0.200.pt.trace.json.gz", bert)
    _place(root / "multi" / "rank1.100.pt.trace.json.gz", small)
    for run, data in PLUGIN_BAD_RUNS.items():
        _place(root / run / "host_1.1.pt.trace.json", data)
    # A gzip stream cut in half, as a copy interrupted mid-way leaves it.
    _place(root / "bad" / "truncated" / "host_1.1.pt.trace.json.gz", bert[: len(bert) // 2])
    # Not trace files by name: must be ignored, never parsed.
    _place(root / "bert_flash" / "notes.json", b"{}")
    _place(root / ".hidden" / "host_1.1.pt.trace.json.gz", small)
    return root


_RECORD = r"""
import sys, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
sys.path.insert(0, sys.argv[2])
from tests.cpu_models import model
torch.manual_seed(0)
m, x = model(sys.argv[3]), torch.randn(2, 32, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
             on_trace_ready=tensorboard_trace_handler(sys.argv[1], worker_name="trainer0", use_gzip=True)) as p:
    for _ in range(4):
        m(x).sum().backward()
        p.step()
"""


@pytest.fixture(scope="session")
def handler_runs(tmp_path_factory) -> dict[str, Path]:
    """Runs written by torch.profiler.tensorboard_trace_handler itself (two spans each), recorded in a
    subprocess so the test process never imports torch."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    out = {}
    root = tmp_path_factory.mktemp("handler_runs")
    for mode in ("sdpa", "eager"):
        d = root / f"cpu_{mode}"
        subprocess.run([sys.executable, "-c", _RECORD, str(d), str(REPO), mode], check=True, timeout=300)
        for f in d.iterdir():
            os.utime(f, (OLD, OLD))
        out[f"cpu_{mode}"] = d
    return out
