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
