"""tb_attn_plugin.profile(..., memory=True) on the CPU: profiler memory events, said once that
CUDA snapshots need a GPU; the score matrix of a Hugging Face eager model found exactly."""

from __future__ import annotations

import inspect
import logging

import pytest

torch = pytest.importorskip("torch")

import tb_attn_plugin  # noqa: E402
from tb_attn_plugin.collector import memory as cmem  # noqa: E402
from tb_attn_plugin.report.build import analyze_file  # noqa: E402


def _profile(model, loss, logdir, **kw):
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    with tb_attn_plugin.profile(logdir, model=model, schedule=sched, memory=True, scalars=False, **kw) as prof:
        for _ in range(2):
            loss().backward()
            prof.step()
    return prof


def test_memory_true_on_the_cpu_records_profiler_events_and_says_so_once(tmp_path, caplog, monkeypatch):
    from demo import models

    monkeypatch.setattr(cmem, "_told_cpu_only", False)
    torch.manual_seed(0)
    m = models.TinyTransformer("eager")
    L, B = 64, 2
    ids = torch.randint(0, models.VOCAB, (B, L))
    with caplog.at_level(logging.WARNING, logger="tb_attn_plugin.collector.memory"):
        prof = _profile(m, lambda: models.loss_fn(m, ids), tmp_path / "a")
        _profile(m, lambda: models.loss_fn(m, ids), tmp_path / "b")
    said = [r for r in caplog.records if "memory events only" in r.getMessage()]
    assert len(said) == 1 and "CUDA" in said[0].getMessage()
    assert prof.snapshots == [] and not list((tmp_path / "a").glob("*.pickle"))
    mem = analyze_file(prof.traces[-1])["memory"]
    score = B * models.HEADS * L * L * 4
    assert {lay["score_bytes"] for lay in mem["layers"]} == {score}
    assert mem["score_matrix"]["blocks"] >= 3 * len(mem["layers"])
    assert mem["score_matrix"]["bytes_total"] == mem["score_matrix"]["blocks"] * score


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_hugging_face_llama_fp32_score_matrix(tmp_path, impl):
    pytest.importorskip("transformers")
    from demo import models

    torch.manual_seed(0)
    m = models.tiny_llama(impl).float()
    B, L = 2, 48
    ids = torch.randint(0, models.VOCAB, (B, L))
    prof = _profile(m, lambda: models.hf_loss_fn(m, ids), tmp_path)
    r = analyze_file(prof.traces[-1])
    mem = r["memory"]
    assert mem is not None and mem["events"] > 0
    if impl == "eager":
        # Query heads after repeat_kv: the score matrix is B·H·L·L fp32.
        score = B * models.HEADS * L * L * 4
        flagged = [lay for lay in mem["layers"] if lay["score_matrix_blocks"]]
        assert flagged and {lay["score_bytes"] for lay in flagged} == {score}
        assert mem["score_matrix"]["bytes_total"] == mem["score_matrix"]["blocks"] * score
    else:
        assert mem["score_matrix"]["blocks"] == 0


def test_history_arguments_follow_the_installed_signature():
    fn = torch.cuda.memory._record_memory_history
    kw = cmem.history_kwargs(fn)
    params = inspect.signature(fn).parameters
    assert kw and set(kw) <= set(params)
    assert kw.get("stacks") == "python" and kw.get("max_entries") == cmem.MAX_ENTRIES

    def old(enabled="all", context="all", stacks="all", max_entries=1):
        pass

    assert cmem.history_kwargs(old) == {"enabled": "all", "context": "all", "stacks": "python",
                                         "max_entries": cmem.MAX_ENTRIES}


def test_memory_scalars_are_logged(tmp_path):
    from demo import models
    from tb_attn_plugin.collector.scalars import report_scalars

    torch.manual_seed(0)
    m = models.TinyTransformer("eager")
    ids = torch.randint(0, models.VOCAB, (1, 32))
    prof = _profile(m, lambda: models.loss_fn(m, ids), tmp_path)
    r = analyze_file(prof.traces[-1])
    got = report_scalars(r)
    assert got["tb_attn/memory/peak_mib"] == r["memory"]["peak_bytes"] / 2**20 > 0
    assert got["tb_attn/memory/score_matrix_mib"] == r["memory"]["score_matrix"]["bytes_total"] / 2**20 > 0
    r["memory"] = None
    assert not any("memory" in k for k in report_scalars(r))
