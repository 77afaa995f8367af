"""The README's collector recipe (schedule wait=1, warmup=1, active=2, no repeat, a 6-step loop)
must not lead a user to an empty span: the collector writes no trace for a window cut short, and
the tab, /ranks, ``tb-attn compare`` and the scalars never take an empty span (one that torch
itself writes, tests/recorded.py ``tail``) for the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.report.spans import is_empty
from tests.conftest import OLD, REPO, all_settled, recorded_trace, wait_runs

P = "/data/plugin/tb_attn"


def _place(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    os.utime(dst, (OLD, OLD))


def test_the_tail_torch_writes_is_empty_and_a_real_span_is_not():
    assert is_empty(analyze_file(str(recorded_trace("tail"))))
    for role in ("sdpa", "negative"):  # no attention, but its step took time: a real span
        assert not is_empty(analyze_file(str(recorded_trace(role))))


_RECIPE = r"""
import json, sys, torch, tb_attn_plugin
sys.path.insert(0, sys.argv[2])
from tests.cpu_models import B, D, L, model
torch.manual_seed(0)
m = model("sdpa")
opt = torch.optim.SGD(m.parameters(), lr=0.1)
loader = [torch.randn(B, L, D) for _ in range(6)]
with tb_attn_plugin.profile(sys.argv[1], model=m, variant="sdpa", memory=True,
                            schedule=torch.profiler.schedule(wait=1, warmup=1, active=2)) as prof:
    for batch in loader:
        loss = m(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()
        prof.step()
print(json.dumps({"traces": prof.traces, "skipped": prof.skipped_windows}))
"""


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    pytest.importorskip("torch")
    run = tmp_path_factory.mktemp("recipe") / "sdpa"
    proc = subprocess.run([sys.executable, "-c", _RECIPE, str(run), str(REPO)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return run, json.loads(proc.stdout.strip().splitlines()[-1])


def test_readme_recipe_writes_one_trace_with_its_steps_and_memory(recipe_run):
    run, out = recipe_run
    assert len(out["traces"]) == 1 and out["skipped"] == 1
    assert sorted(p.name for p in run.glob("*.pt.trace.json.gz")) == [Path(out["traces"][0]).name]
    report = analyze_file(out["traces"][0])
    assert report["calls"] > 0 and [s["step"] for s in report["steps"]] == [2, 3]
    assert report["memory"] is not None and report["metadata"]["memory"] is True


def test_readme_recipe_attention_scalar_never_drops_to_zero(recipe_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, _ = recipe_run
    acc = EventAccumulator(str(run))
    acc.Reload()
    values = [e.value for e in acc.Scalars("tb_attn/attention_ms")]
    assert values and all(v > 0 for v in values), values


def test_no_scalars_for_an_empty_span():
    from tb_attn_plugin.collector.scalars import report_scalars

    assert report_scalars(analyze_file(str(recorded_trace("tail")))) == {}
    assert report_scalars(analyze_file(str(recorded_trace("sdpa"))))["tb_attn/attention_ms"] > 0


@pytest.fixture(scope="module")
def tail_logdir(tmp_path_factory):
    """Two runs as the README's recipe leaves them with plain torch.profiler: a real span, then an empty tail."""
    root = tmp_path_factory.mktemp("tail_logdir")
    for run, role in (("mha", "eager"), ("sdpa", "sdpa")):
        _place(root / run / "host_1.100.pt.trace.json.gz", recorded_trace(role).read_bytes())
        _place(root / run / "host_1.200.pt.trace.json.gz", recorded_trace("tail").read_bytes())
    return root


def test_compare_takes_the_spans_with_steps(tail_logdir):
    proc = subprocess.run([sys.executable, "-m", "tb_attn_plugin", "compare", str(tail_logdir / "mha"),
                           str(tail_logdir / "sdpa"), "-q", "--json"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert "host_1.100.pt.trace.json.gz (worker host_1, latest span that recorded something; 1 later recorded nothing)" in proc.stderr
    doc = json.loads(proc.stdout)
    assert all(t["calls"] > 0 and t["attention_cpu_us"] > 0 for t in doc["totals"]), doc["totals"]


def test_tab_opens_the_span_with_steps_and_memory_says_why_not(tail_logdir, tb_app):
    client, _ = tb_app(tail_logdir)
    doc = wait_runs(client, all_settled)
    for run in doc["runs"]:
        (worker,) = run["workers"]
        assert worker["default_span"] == "100"
        assert [s["summary"]["empty"] for s in worker["spans"]] == [False, True]
    report = json.loads(client.get(f"{P}/report?run=sdpa").data)
    assert report["calls"] > 0
    mem = json.loads(client.get(f"{P}/memory?run=sdpa&span=200").data)
    assert mem["memory"] is None and "pick another span" in mem["note"] and "profile_memory=True" not in mem["note"]
