"""Reports survive a restart through the disk cache; nothing is ever written into the logdir."""

from __future__ import annotations

import json
import os
import shutil

from tests.conftest import all_settled, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def make_logdir(root, shared_traces):
    for run, src in (("flash", "tl_h100_bert_small_sdpa_flash"), ("small", "tl_mi300x_torch_compile_small")):
        (root / run).mkdir(parents=True)
        shutil.copy(shared_traces / f"{src}.json.gz", root / run / NAME)
        os.utime(root / run / NAME, (1_600_000_000, 1_600_000_000))
    (root / "broken").mkdir()
    (root / "broken" / NAME).write_bytes(b"\x1f\x8b\x08\x00 not a gzip stream" * 10)
    os.utime(root / "broken" / NAME, (1_600_000_000, 1_600_000_000))
    return root


def snapshot(root):
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))} | {"dirs": sorted(str(d) for d in root.rglob("*") if d.is_dir())}


def settle(client):
    return wait_runs(client, lambda d: all_settled(d, ["flash", "small", "broken"]))


def test_restart_reads_reports_from_the_cache(tb_app, tmp_path, shared_traces):
    logdir = make_logdir(tmp_path / "logdir", shared_traces)
    before = snapshot(logdir)
    cache = tmp_path / "cache"

    client, plugins = tb_app(logdir, cache_dir=cache)
    first = settle(client)
    report = client.get(f"{P}/report?run=flash").data
    assert plugins["tb_attn"].index.pool.executor is not None  # it did analyse
    plugins["tb_attn"].close()
    assert len(list(cache.rglob("*.json"))) == 3  # two reports and one error

    client, plugins = tb_app(logdir, cache_dir=cache)
    again = settle(client)
    assert plugins["tb_attn"].index.pool.executor is None  # no worker process was ever started
    assert again["runs"] == first["runs"]  # same statuses, summaries and error messages
    assert client.get(f"{P}/report?run=flash").data == report
    assert snapshot(logdir) == before  # nothing written into the logdir, not even a directory


def test_engine_version_is_part_of_the_key(tb_app, tmp_path, shared_traces, monkeypatch):
    logdir = make_logdir(tmp_path / "logdir", shared_traces)
    cache = tmp_path / "cache"
    client, plugins = tb_app(logdir, cache_dir=cache)
    settle(client)
    plugins["tb_attn"].close()

    from tb_attn_plugin.plugin import cache as cache_mod

    monkeypatch.setattr(cache_mod, "ENGINE_VERSION", "test-next")
    client, plugins = tb_app(logdir, cache_dir=cache)
    settle(client)
    assert plugins["tb_attn"].index.pool.executor is not None  # analysed again with the "new" engine
    assert (cache / "reports-vtest-next").is_dir()


def test_unwritable_cache_dir_keeps_reports_in_memory(tb_app, tmp_path, shared_traces):
    logdir = make_logdir(tmp_path / "logdir", shared_traces)
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory would go")
    client, plugins = tb_app(logdir, cache_dir=blocker / "cache")
    assert plugins["tb_attn"].index.cache.on_disk is False
    doc = settle(client)
    assert [r["status"] for r in doc["runs"]] == ["error", "ready", "ready"]
    r = client.get(f"{P}/report?run=flash")
    assert r.status_code == 200 and json.loads(r.data)["calls"] == 4
    assert blocker.read_text().startswith("a file")
