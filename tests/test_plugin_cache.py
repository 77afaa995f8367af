"""Reports survive a restart through the disk cache; nothing is ever written into the logdir."""

from __future__ import annotations

import json
import os
import shutil

from tests.conftest import all_settled, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def make_logdir(root, recorded_traces):
    for run, src in (("flash", "sdpa"), ("small", "small")):
        (root / run).mkdir(parents=True)
        shutil.copy(recorded_traces / f"{src}.json.gz", root / run / NAME)
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


def test_restart_reads_reports_from_the_cache(tb_app, tmp_path, recorded_traces):
    logdir = make_logdir(tmp_path / "logdir", recorded_traces)
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


def test_engine_version_is_part_of_the_key(tb_app, tmp_path, recorded_traces, monkeypatch):
    logdir = make_logdir(tmp_path / "logdir", recorded_traces)
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


def test_unwritable_cache_dir_keeps_reports_in_memory(tb_app, tmp_path, recorded_traces):
    logdir = make_logdir(tmp_path / "logdir", recorded_traces)
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache directory would go")
    client, plugins = tb_app(logdir, cache_dir=blocker / "cache")
    assert plugins["tb_attn"].index.cache.on_disk is False
    doc = settle(client)
    assert [r["status"] for r in doc["runs"]] == ["error", "ready", "ready"]
    r = client.get(f"{P}/report?run=flash")
    assert r.status_code == 200 and json.loads(r.data)["calls"] == 2
    assert blocker.read_text().startswith("a file")


def test_the_disk_cache_stays_under_its_limit_least_recently_used_first(tmp_path):
    from tb_attn_plugin.plugin.cache import PRUNE_TO, ReportCache, Result, cache_key

    root = tmp_path / "cache"
    old = root / "reports-v0" / "ab"  # an older engine's entry: never read again
    old.mkdir(parents=True)
    (old / ("ab" + "0" * 62 + ".json")).write_bytes(b"x" * 50_000)
    os.utime(old / ("ab" + "0" * 62 + ".json"), (1_500_000_000, 1_500_000_000))
    foreign = root / "reports-v0" / "ab" / "notes.txt"  # not an entry: never touched
    foreign.write_bytes(b"y" * 500_000)

    cache = ReportCache(str(root), max_bytes=200_000)
    keys = [cache_key(f"/runs/r{i}/t.json", i, 1.0) for i in range(12)]
    for i, key in enumerate(keys):
        cache.put(key, Result("ready", None, {"calls": i}, b"r" * 30_000))
        os.utime(cache._file(key), (1_600_000_000 + i, 1_600_000_000 + i))  # written in this order
        if i == 2:
            assert cache.get(key) is not None  # read again now: most recently used of the first three
    entries = [p for p in root.rglob("*.json")]
    assert sum(p.stat().st_size for p in entries) <= 200_000
    assert not (old / ("ab" + "0" * 62 + ".json")).exists()
    assert foreign.read_bytes() == b"y" * 500_000
    on_disk = {p.name[:-5] for p in entries}
    assert keys[-1] in on_disk and keys[2] in on_disk and keys[0] not in on_disk and keys[1] not in on_disk
    # A prune leaves room (PRUNE_TO of the limit), so the next writes do not each prune again.
    assert cache.prune() == 0
    assert sum(p.stat().st_size for p in root.rglob("*.json")) <= 200_000 * PRUNE_TO + 30_100


def test_a_new_tensorboard_trims_a_cache_over_its_limit(tb_app, tmp_path, recorded_traces):
    cache = tmp_path / "cache"
    stale = cache / "reports-v0" / "cd"
    stale.mkdir(parents=True)
    for i in range(40):
        f = stale / (f"cd{i:062x}" + ".json")
        f.write_bytes(b"z" * 100_000)
        os.utime(f, (1_500_000_000 + i, 1_500_000_000 + i))
    logdir = make_logdir(tmp_path / "logdir", recorded_traces)
    client, _ = tb_app(logdir, cache_dir=cache, env={"TB_ATTN_CACHE_MAX_MB": "1"})
    settle(client)
    total = sum(p.stat().st_size for p in cache.rglob("*.json"))
    assert total <= 1 << 20
    assert not (stale / f"cd{0:062x}.json").exists()


def test_a_damaged_cache_entry_answers_422_in_one_line(tb_app, tmp_path, recorded_traces):
    """A cached report whose layers do not decode as the format's Layer (a damaged or foreign entry):
    the routes that read them typed say so in one line, never a 500."""
    logdir = make_logdir(tmp_path / "logdir", recorded_traces)
    cache = tmp_path / "cache"
    client, plugins = tb_app(logdir, cache_dir=cache)
    settle(client)
    plugins["tb_attn"].close()
    damaged = 0
    for entry in cache.rglob("*.json"):
        header, _, body = entry.read_bytes().partition(b"\n")
        if json.loads(header)["status"] != "ready":
            continue
        report = json.loads(body)
        report["layers"][0]["gpu_us"] = "fast"
        entry.write_bytes(header + b"\n" + json.dumps(report).encode())
        damaged += 1
    assert damaged == 2

    client, plugins = tb_app(logdir, cache_dir=cache)
    settle(client)
    for url in (f"{P}/call?run=flash&id=0", f"{P}/compare?run=flash&run=small"):
        r = client.get(url)
        error = json.loads(r.data)["error"]
        assert r.status_code == 422 and "\n" not in error, (url, r.status_code, error)
        assert "cached report cannot be read" in error and "$.layers[0].gpu_us" in error
