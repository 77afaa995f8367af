"""/ranks and rank-against-rank /compare in the real TensorBoard app, on a job built from CPU traces."""

from __future__ import annotations

import json
import os

import pytest

from tb_attn_plugin.ranks.summary import summarize_ranks
from tb_attn_plugin.report.build import analyze_file
from tests.conftest import all_settled, wait_runs
from tests.rank_jobs import write_job


@pytest.fixture(scope="module")
def ranks_logdir(cpu_traces, tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks_logdir")
    s = cpu_traces["sdpa"]
    write_job(root / "job", {0: s, 1: s, 2: cpu_traces["math"], 3: s}, slow={1: 1.7}, world_size=4)
    write_job(root / "named", {0: s, 1: s}, by="worker name", slow={0: 1.2})
    # Two traces that both say they are rank 0 (a copied file, a rerun in one directory).
    got = write_job(root / "twice", {0: s}, world_size=2)
    (root / "twice" / "node9_4999.1700000000009.pt.trace.json.gz").write_bytes(got[0].read_bytes())
    (root / "single").mkdir()
    (root / "single" / "host_1.1.pt.trace.json").write_bytes(s.read_bytes())
    for dirpath, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(dirpath, n), (1_600_000_000, 1_600_000_000))
    return root


def _get(client, url):
    resp = client.get("/data/plugin/tb_attn/" + url)
    return resp.status_code, json.loads(resp.data)


def test_ranks_route_serves_the_summary_of_the_job(tb_app, ranks_logdir):
    client, _ = tb_app(ranks_logdir)
    wait_runs(client, all_settled)
    code, doc = _get(client, "ranks?run=job")
    assert code == 200
    want = summarize_ranks([analyze_file(str(p)) for p in sorted((ranks_logdir / "job").iterdir())])
    assert {k: v for k, v in doc.items() if k not in ("run", "errors")} == json.loads(json.dumps(want))
    assert doc["run"] == "job" and doc["errors"] == []
    assert doc["slowest"]["rank"] in (1, 2) and [o["rank"] for o in doc["odd_ranks"] if o["what"] == "backend"] == [2]
    code, named = _get(client, "ranks?run=named")
    assert code == 200 and named["slowest"]["rank"] == 0 and {r["rank_from"] for r in named["ranks"]} == {"worker name"}
    code, err = _get(client, "ranks?run=single")  # a run the tab lists: no 404 for the browser to log (issue 47)
    assert code == 200 and "not a job of several ranks" in err["not_a_job"] and "ranks" not in err
    code, err = _get(client, "ranks?run=nope")
    assert code == 404 and "no run named 'nope'" in err["error"]
    code, err = _get(client, "ranks")
    assert code == 400 and "missing parameter 'run'" in err["error"]


def test_compare_rank_against_rank(tb_app, ranks_logdir):
    client, _ = tb_app(ranks_logdir)
    doc = wait_runs(client, all_settled)
    workers = [w["worker"] for r in doc["runs"] if r["run"] == "job" for w in r["workers"]]
    assert len(workers) == 4
    w0, w1 = workers[0], workers[1]  # ranks 0 and 1 (1 is the same trace, 1.7x slower)
    code, cmp_ = _get(client, f"compare?run=job&worker={w0}&run=job&worker={w1}")
    assert code == 200
    assert cmp_["runs"] == ["job rank 0", "job rank 1"]  # the sides are named by rank, not by file
    fused = [s for s in cmp_["stages"] if s["stage"] == "fused" and s["pass"] == "fwd"][0]
    assert fused["values"][1] == pytest.approx(1.7 * fused["values"][0], rel=1e-3)
    code, err = _get(client, f"compare?run=job&worker={w0}&run=job")
    assert code == 400 and "one worker per run" in err["error"]
    # Two traces claiming one rank: "twice rank 0" would name both sides, so they are run/worker.
    twice = sorted(w["worker"] for r in doc["runs"] if r["run"] == "twice" for w in r["workers"])
    assert len(twice) == 2
    code, cmp_ = _get(client, f"compare?run=twice&worker={twice[0]}&run=twice&worker={twice[1]}")
    assert code == 200 and cmp_["runs"] == [f"twice/{twice[0]}", f"twice/{twice[1]}"]
    code, err = _get(client, f"compare?run=job&worker={w0}&run=job&worker={w0}")
    assert code == 400
