"""The Sweep view in a real browser: a real CPU sweep (tests/sweep_data.py) under a real
``tensorboard --logdir``, read by Debian's chromium (frontend/browser/sweep_e2e.mjs) and compared
with the backend's /sweep answer; and TensorBoard's own HParams plugin, over HTTP, listing every
cell with the values in sweep.jsonl. TB_ATTN_UPDATE_SCREENSHOTS=1 writes docs/screenshots/sweep.png."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest

pytest.importorskip("torch")

from tests.sweep_data import record_sweep  # noqa: E402
from tests.browser import require_browser, run_script, serving, shots_dir  # noqa: E402
from tests.test_plugin_tensorboard import poll  # noqa: E402


@pytest.fixture(scope="module")
def sweep_tb(tmp_path_factory):
    import tb_attn_plugin

    logdir = tmp_path_factory.mktemp("browser_sweep") / "logdir"
    records = record_sweep(logdir / "cpu_sweep", hparams_logdir=logdir / "hparams")
    # A second, smaller sweep sharing the HParams logdir, at a length the first never ran: its values must
    # reach the HParams filters too.
    records += list(tb_attn_plugin.sweep(str(logdir / "second_sweep"), backends="math", seq_len="32", batch="1",
                                         heads=2, head_dim=16, dtype="float32", device="cpu", min_run_time=0.02,
                                         warmup=1, threads=1, hparams_logdir=str(logdir / "hparams"),
                                         progress=False, out=False))
    with serving(logdir, tmp_path_factory.mktemp("tb")) as (base, proc):
        yield base, records, proc


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_hparams_plugin_lists_every_cell(sweep_tb):
    base, records, proc = sweep_tb
    poll(f"{base}/data/plugins_listing", lambda d: d.get("hparams", {}).get("enabled"), proc=proc)
    exp = _post(f"{base}/data/plugin/hparams/experiment", {"experimentName": ""})
    infos = {h["name"]: h for h in exp["hparamInfos"]}
    assert set(infos) >= {"backend", "batch", "seq_len", "status"}
    # Inferred from every session of both sweeps, not from the first sweep's config.
    lens = {r["seq_len"] for r in records}
    assert min(lens) == 32 and infos["seq_len"]["domainInterval"] == {"minValue": 32, "maxValue": max(lens)}
    cols = [{"hparam": n, "includeInResult": True} for n in ("backend", "batch", "seq_len", "status")]
    cols.append({"metric": {"tag": "sweep/median_ms", "group": ""}, "includeInResult": True})
    groups = _post(f"{base}/data/plugin/hparams/session_groups",
                   {"experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                                                              "STATUS_RUNNING"],
                    "colParams": cols, "startIndex": 0, "sliceSize": 1000})
    by_id = {r["cell_id"]: r for r in records}
    got = {g["name"]: g for g in groups["sessionGroups"]}  # cell ids, from the sessions' trial ids
    assert set(got) == set(by_id)
    for cell_id, g in got.items():
        rec = by_id[cell_id]
        assert g["hparams"]["backend"] == rec["backend"] and g["hparams"]["status"] == rec["status"]
        assert g["hparams"]["seq_len"] == rec["seq_len"] and g["hparams"]["batch"] == rec["batch"]
        metrics = {m["name"]["tag"]: m["value"] for m in g.get("metricValues", [])}
        if rec["status"] == "ok":
            assert math.isclose(metrics["sweep/median_ms"], rec["median_s"] * 1e3, rel_tol=1e-6)
        else:
            assert "sweep/median_ms" not in metrics


def test_sweep_view_in_a_real_browser(sweep_tb, tmp_path):
    require_browser()
    base, records, _ = sweep_tb
    profiles = {f"cpu_sweep/{r['profile_run']}" for r in records if r.get("profile_run")}
    poll(f"{base}/data/plugin/tb_attn/runs", lambda d: profiles <= {r["run"] for r in d["runs"]})
    shots = shots_dir(tmp_path)
    run_script("sweep_e2e.mjs", base, shots, SWEEP_RUN="cpu_sweep")
    assert (shots / "sweep.png").stat().st_size > 10_000
