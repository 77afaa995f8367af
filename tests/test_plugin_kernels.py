"""The plugin's side of the kernel table: TB_ATTN_PATTERNS (and the size limits) in the workers and
in the cache key, and /annotated streaming a run's annotated trace without writing into the logdir (real TensorBoard app)."""

from __future__ import annotations

import gzip
import json
import os

from tests.conftest import OLD, all_settled, wait_runs
from tests.kernel_traces import MLP, TraceBuilder
from tests.test_user_patterns import GOOD

UNKNOWN = "void zz_custom_attn_fwd_kernel<128, true>(Params)"
TABLE = GOOD.replace('"my_attn_fwd_kernel"', '"zz_custom_attn_fwd_kernel"').replace(
    "my_attn_fwd_kernel<128>", "zz_custom_attn_fwd_kernel<64>")


def logdir_with_custom_kernel(root):
    b = TraceBuilder()
    b.graph_replay([[(UNKNOWN, 50.0)] for _ in range(3)], between=MLP)
    path = root / "custom" / "host_1.1700000000000000001.pt.trace.json.gz"
    path.parent.mkdir(parents=True)
    b.write(path)
    os.utime(path, (OLD, OLD))
    return root


def report(client, run="custom"):
    wait_runs(client, lambda d: all_settled(d, [run]))
    resp = client.get(f"/data/plugin/tb_attn/report?run={run}")
    return resp.status_code, json.loads(resp.data)


def test_patterns_env_reaches_the_workers_and_the_cache_key(tb_app, tmp_path):
    logdir = logdir_with_custom_kernel(tmp_path / "logdir")
    cache = tmp_path / "shared-cache"
    client, _ = tb_app(logdir, cache_dir=cache)
    code, r = report(client)
    assert code == 200 and r["calls"] == 0 and r["unknown_kernels"][0]["name"] == UNKNOWN
    table = tmp_path / "mine.toml"
    table.write_text(TABLE)
    # Same cache directory, now with the user's table: the cached report must not be served.
    client, _ = tb_app(logdir, cache_dir=cache, env={"TB_ATTN_PATTERNS": str(table)})
    code, r = report(client)
    assert code == 200 and r["calls"] == 3 and r["unknown_kernels"] == []
    assert r["kernel_table"]["user_families"] == 1
    # An edited table is a new key again; a broken one is a 4xx naming the file and the row, for every run.
    table.write_text(TABLE.replace('"zz_custom_attn_fwd_kernel<64>"', '"no match here"'))
    client, plugins = tb_app(logdir, cache_dir=cache, env={"TB_ATTN_PATTERNS": str(table)})
    code, r = report(client)
    # The file by its name: the server's directories are not the browser's business (issue 27).
    assert code == 422 and f"TB_ATTN_PATTERNS: {table.name}: " in r["error"] and "my_attention_fwd" in r["error"]
    assert str(table.parent) not in r["error"]
    assert "TB_ATTN_PATTERNS" in r["error"]


def test_size_limit_is_the_plugins_own_not_the_worker_servers(tb_app, tmp_path):
    """Workers fork from one server per Python process, started with whatever environment was there
    first; each plugin's limit must still be the one it was configured with, in both directions,
    and a file refused under one limit must not be answered from the cache under another."""
    logdir = logdir_with_custom_kernel(tmp_path / "logdir")
    cache = tmp_path / "shared-cache"
    client, plugins = tb_app(logdir, cache_dir=cache, env={"TB_ATTN_MAX_TRACE_BYTES": "1K"})
    code, r = report(client)
    assert code == 422 and "TB_ATTN_MAX_TRACE_BYTES" in r["error"], r
    plugins["tb_attn"].close()
    client, _ = tb_app(logdir, cache_dir=cache)
    code, r = report(client)
    assert code == 200 and r["calls"] == 0, r


def test_annotated_download(tb_app, cpu_traces, tmp_path):
    logdir = tmp_path / "logdir"
    run = logdir / "eager"
    run.mkdir(parents=True)
    dst = run / "trainer0.1700000000000000001.pt.trace.json.gz"
    dst.write_bytes(cpu_traces["eager"].read_bytes())
    os.utime(dst, (OLD, OLD))
    before = sorted(p.relative_to(logdir) for p in logdir.rglob("*"))
    client, _ = tb_app(logdir)
    wait_runs(client, lambda d: all_settled(d, ["eager"]))
    resp = client.get("/data/plugin/tb_attn/annotated?run=eager")
    assert resp.status_code == 200, resp.data[:300]
    assert resp.headers["Content-Type"] == "application/gzip"
    assert 'filename="trainer0.1700000000000000001.pt.trace.tb-attn.json.gz"' in resp.headers["Content-Disposition"]
    doc = json.loads(gzip.decompress(resp.data))
    names = [e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert "tb-attn: attention calls" in names
    assert sum(1 for e in doc["traceEvents"] if e.get("cat") == "tb_attn.call") > 0
    assert sorted(p.relative_to(logdir) for p in logdir.rglob("*")) == before  # nothing written into the logdir
    assert client.get("/data/plugin/tb_attn/annotated?run=nope").status_code == 404
    assert client.get("/data/plugin/tb_attn/annotated").status_code == 400


def test_patterns_env_takes_several_files(tb_app, tmp_path):
    """TB_ATTN_PATTERNS=FILE:FILE: one file's attention row and another's combine row make one call each."""
    b = TraceBuilder()
    b.graph_replay([[(UNKNOWN, 50.0), ("zz_custom_attn_combine", 5.0)] for _ in range(3)], between=MLP)
    logdir = tmp_path / "logdir"
    path = logdir / "custom" / "host_1.1700000000000000001.pt.trace.json.gz"
    path.parent.mkdir(parents=True)
    b.write(path)
    os.utime(path, (OLD, OLD))
    first, second = tmp_path / "attn.toml", tmp_path / "combine.toml"
    first.write_text(TABLE)
    second.write_text(TABLE.replace('"my_attention_fwd"', '"zz_combine"').replace('"zz_custom_attn_fwd_kernel"',
                      '"^zz_custom_attn_combine$"').replace('"zz_custom_attn_fwd_kernel<64>"', '"zz_custom_attn_combine"')
                      .replace('"fused"', '"split_kv_reduce"'))
    client, _ = tb_app(logdir, env={"TB_ATTN_PATTERNS": f"{first}{os.pathsep}{second}"})
    code, r = report(client)
    assert code == 200 and r["calls"] == 3, r
    assert {s["stage"]: round(s["gpu_us"]) for s in r["stages"] if s["gpu_us"]} == {"fused": 150, "split_kv_reduce": 15}
    assert r["kernel_table"]["user_families"] == 2 and r["kernel_table"]["user_sources"] == ["attn.toml", "combine.toml"]
