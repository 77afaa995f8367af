"""The plugin's /sweeps and /sweep routes through the real TensorBoard WSGI app, over a real CPU
sweep (tests/sweep_data.py) and a hostile sweep.jsonl."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from tb_attn_plugin.sweeps import store  # noqa: E402
from tests.conftest import make_tb_app, wait_runs  # noqa: E402
from tests.sweep_data import record_sweep  # noqa: E402

P = "/data/plugin/tb_attn"
HOSTILE = [
    b"not json at all",
    b'{"backend": "<img src=x onerror=alert(1)>", "batch": 1, "seq_len": 64, "status": "ok", "median_s": 0.001}',
    b'{"backend": "math", "batch": -1, "seq_len": 64, "status": "ok"}',
    b'{"backend": "math", "batch": 1, "seq_len": 64, "status": "exploded"}',
    b'[1, 2, 3]',
    b'{"backend": "flash", "batch": 1, "seq_len": 128, "status": "ok", "median_s": "fast", '
    b'"profile_run": "../../etc/passwd"}',
    b'{"backend": "math", "batch": 1, "seq_len": 2',  # cut short
    b'[' * 100_000 + b']' * 100_000,  # deeper than json can nest
    b'{"backend": "eager", "batch": 2, "seq_len": 64, "status": "oom", "reason": {"html": "<b>"}, "causal": "yes", '
    b'"peak_bytes": true, "extra": [1, 2]}',
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep_logdir")
    records = record_sweep(root / "cpu_sweep")
    (root / "hostile").mkdir()
    (root / "hostile" / store.FILENAME).write_bytes(b"\n".join(HOSTILE) + b"\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / store.FILENAME).write_bytes(HOSTILE[1])
    client, plugins = make_tb_app(root, tmp_path_factory.mktemp("cache"))
    profile_runs = {f"cpu_sweep/{r['profile_run']}" for r in records if r.get("profile_run")}
    wait_runs(client, lambda d: profile_runs <= {r["run"] for r in d["runs"]})
    yield client, records, root
    plugins["tb_attn"].close()


def get(client, url):
    r = client.get(url)
    assert r.headers["Content-Type"].startswith("application/json"), url
    return r.status_code, json.loads(r.data)


def test_sweeps_lists_sweep_directories_only(served):
    client, _, _ = served
    code, doc = get(client, f"{P}/sweeps")
    assert code == 200
    assert [s["run"] for s in doc["sweeps"]] == ["cpu_sweep", "hostile"]  # never .hidden


def test_sweep_serves_every_cell_of_sweep_jsonl_with_analysis(served):
    client, records, _ = served
    code, doc = get(client, f"{P}/sweep?run=cpu_sweep")
    assert code == 200 and doc["skipped_lines"] == 0
    got = {c["cell_id"]: c for c in doc["cells"]}
    assert set(got) == {r["cell_id"] for r in records}
    for r in records:
        c = got[r["cell_id"]]
        assert c["status"] == r["status"] and c["median_s"] == r["median_s"] and c["peak_bytes"] == r["peak_bytes"]
        assert c["device_name"] == r["device_name"] and c["torch_version"] == r["torch_version"]
        assert "times_s" not in c
    statuses = doc["analysis"]["status_counts"]
    assert statuses.get("unsupported") == 12 and statuses.get("oom", 0) >= 2 and statuses["ok"] >= 20
    oom = {(o["backend"], o["batch"]) for o in doc["analysis"]["oom_boundary"]}
    assert ("math", 4) in oom
    fits = {(f["backend"], f["batch"]): f for f in doc["analysis"]["fits"]}
    assert fits[("math", 1)]["memory_exponent"] > 1.6
    best = doc["analysis"]["best"]
    assert {(b["batch"], b["seq_len"]) for b in best} == {(b, 2**k) for b in (1, 4) for k in range(6, 12)}
    for b in best:
        ok = [r for r in records if r["status"] == "ok" and r["batch"] == b["batch"] and r["seq_len"] == b["seq_len"]]
        assert b["backend"] == min(ok, key=lambda r: r["median_s"])["backend"]
    assert "4*B*H*Lq*Lk*D" in doc["conventions"]["flops"] and "cpu" in doc["conventions"]["peak_memory"]


def test_profile_links_name_runs_the_plugin_serves(served):
    client, records, _ = served
    _, doc = get(client, f"{P}/sweep?run=cpu_sweep")
    linked = [c for c in doc["cells"] if c["profile_run"]]
    assert {c["backend"] for c in linked} == {"math", "flash", "eager"}
    assert all(c["seq_len"] == 256 for c in linked)
    for c in linked:
        code, rep = get(client, f"{P}/report?run={c['profile_run']}")
        while code == 202:
            code, rep = get(client, f"{P}/report?run={c['profile_run']}")
        assert code == 200 and rep["calls"] >= 1


def test_hostile_sweep_file_is_read_safely(served):
    client, _, _ = served
    code, doc = get(client, f"{P}/sweep?run=hostile")
    assert code == 200
    assert doc["skipped_lines"] == 6
    names = sorted(c["backend"] for c in doc["cells"])
    assert names == ["<img src=x onerror=alert(1)>", "eager", "flash"]
    eager = next(c for c in doc["cells"] if c["backend"] == "eager")
    assert eager["reason"] is None and eager["causal"] is None and eager["peak_bytes"] is None and "extra" not in eager
    flash = next(c for c in doc["cells"] if c["backend"] == "flash")
    assert flash["profile_run"] is None  # "../../etc/passwd" is never a link
    assert flash["median_s"] is None  # "fast" is not a number
    assert all(f["time_exponent"] is None for f in doc["analysis"]["fits"])


@pytest.mark.parametrize("query, code", [("", 400), ("?run=", 400), ("?run=nope", 404), ("?run=a&run=b", 400),
                                         ("?run=.hidden", 404), ("?run=" + "x" * 5000, 400)])
def test_bad_sweep_requests_are_4xx(served, query, code):
    client, _, _ = served
    got, doc = get(client, f"{P}/sweep{query}")
    assert got == code and "error" in doc


def test_a_logdir_with_only_a_sweep_activates_the_tab(served, tmp_path):
    _, _, root = served
    only = tmp_path / "only"
    only.mkdir()
    with open(root / "cpu_sweep" / store.FILENAME, "rb") as fh:
        (only / store.FILENAME).write_bytes(fh.read())
    client, plugins = make_tb_app(only, tmp_path / "cache")
    try:
        plugin = plugins["tb_attn"]
        plugin._sweeps.wait_scanned(10)
        assert plugin.is_active()
        code, doc = get(client, f"{P}/sweep?run=.")
        assert code == 200 and doc["run"] == "."
        assert all(c["profile_run"] is None for c in doc["cells"])  # the profiles are not in this logdir
    finally:
        plugins["tb_attn"].close()


def test_oversized_sweep_file_is_refused_with_a_message(served, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "MAX_BYTES", 100)
    big = tmp_path / "big"
    big.mkdir()
    (big / store.FILENAME).write_bytes(b"\n" * 200)
    client, plugins = make_tb_app(tmp_path, tmp_path / "cache")
    try:
        plugins["tb_attn"]._sweeps.wait_scanned(10)
        code, doc = get(client, f"{P}/sweep?run=big")
        assert code == 422 and "big/sweep.jsonl" in doc["error"] and "200 bytes" in doc["error"]
    finally:
        plugins["tb_attn"].close()
