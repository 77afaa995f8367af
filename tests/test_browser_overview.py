"""The Overview view (attention in its step, issue 48) in a real browser: a real ``tensorboard
--logdir`` over a CPU training loop recorded here with torch.profiler (a DataLoader and an optimizer
step: the host side) and, when ../shared is present, the H100 OWLv2 eager trace (the step bar, idle)
and the A100 NCCL trace (three steps: communication, the per-step spread); Debian's chromium driven
by playwright-core (frontend/browser/overview.mjs) checks that the tab opens on the Overview and
compares what it shows with the backend's JSON. With TB_ATTN_UPDATE_SCREENSHOTS=1 the OWLv2 shot goes
to docs/screenshots/overview.png."""

from __future__ import annotations

import json

import pytest

from tests.browser import require_browser, run_script, serving, shots_dir
from tests.conftest import SHARED_TRACES
from tests.test_browser import SPAN, _put


def _serving_trace(path) -> bytes:
    """Four decode calls and two prompts through SDPA on an H100 (tests/test_phases_serving.py's builder):
    the phase table and its roofline column (a decode judged on the KV cache it reads)."""
    from tests.kernel_traces import TraceBuilder
    from tests.test_phases_serving import _sdpa_call
    b = TraceBuilder()
    for i in range(4):
        _sdpa_call(b, i, [8, 32, 1, 128], [8, 32, 4096, 128], 220.0)
    for i in range(2):
        _sdpa_call(b, 4 + i, [1, 32, 4096, 128], [1, 32, 4096, 128], 700.0)
    return b.write(path).read_bytes()


def test_overview_view_in_a_real_browser(tmp_path):
    require_browser()
    logdir = tmp_path / "logdir"
    pytest.importorskip("torch")
    from tests.cpu_models import record_training_loop

    _put(logdir / "cpu_training_loop" / f"worker0.{SPAN}.pt.trace.json", record_training_loop(tmp_path / "loop.json").read_bytes())
    runs = {"cpu": "cpu_training_loop", "serving": "built_serving_h100"}
    _put(logdir / "built_serving_h100" / f"worker0.{SPAN}.pt.trace.json", _serving_trace(tmp_path / "serving.json"))
    for key, name in (("owl", "tl_h100_owlv2_eager_bmm_softmax"), ("nccl", "hta_a100_negative_log_softmax_fwdbwd")):
        src = SHARED_TRACES / f"{name}.json.gz"
        if src.exists():  # without ../shared the CPU loop alone is checked
            _put(logdir / name / f"worker0.{SPAN}.pt.trace.json.gz", src.read_bytes())
            runs[key] = name
    shots = shots_dir(tmp_path)
    with serving(logdir, tmp_path) as (url, _):
        run_script("overview.mjs", url, shots, RUNS_JSON=json.dumps(runs))
    for key in runs:
        name = "overview" if key == "owl" else f"overview_{key}"
        assert (shots / f"{name}.png").stat().st_size > 10_000, f"screenshot {name}.png is missing or blank"
