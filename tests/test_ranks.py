"""The rank view: ranks found from distributedInfo or worker names, the slowest rank and imbalance,
ranks running another implementation, per-layer spread, CLI text and JSON."""

from __future__ import annotations

import json

import pytest

from tb_attn_plugin import cli
from tb_attn_plugin.ranks.identify import rank_from_name, rank_of
from tb_attn_plugin.ranks.summary import headline, summarize_ranks
from tb_attn_plugin.report.build import analyze_file
from tests.rank_jobs import write_job


@pytest.mark.parametrize("worker,rank", [("host_rank3", 3), ("rank12", 12), ("node0-RANK_7", 7), ("trainer_rank-2", 2),
                                         ("ip-10-0-0-1_2231", None), ("frankly5", None), ("host", None)])
def test_rank_from_worker_name(worker, rank):
    assert rank_from_name(worker) == rank


def test_distributed_info_wins_over_name_and_is_checked():
    base = {"source": {"worker": "host_rank9"}}
    assert rank_of({**base, "distributed": {"rank": 2, "world_size": 8}}) == (2, 8, "distributedInfo")
    assert rank_of(base) == (9, None, "worker name")
    # Untrusted values: a bool, a negative or a string rank is not a rank; the name is used instead.
    for bad in (True, -1, "3", 1.5):
        assert rank_of({**base, "distributed": {"rank": bad}}) == (9, None, "worker name")
    assert rank_of({"source": {"worker": "host"}, "distributed": {}}) is None


@pytest.fixture(scope="module")
def job_dist(cpu_traces, tmp_path_factory):
    """Four ranks of SDPA by distributedInfo (world size 4); rank 2 is 1.6x slower, rank 3 ran eager."""
    root = tmp_path_factory.mktemp("job_dist")
    s = cpu_traces["sdpa"]
    write_job(root / "job", {0: s, 1: s, 2: s, 3: cpu_traces["eager"]}, slow={2: 1.6})
    return root


def test_rank_summary_from_distributed_info(job_dist):
    files = sorted((job_dist / "job").iterdir())
    reports = [analyze_file(str(f)) for f in files]
    doc = summarize_ranks(reports)
    assert doc is not None and doc["rank_count"] == 4 and doc["world_size"] == 4
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    assert {r["rank_from"] for r in doc["ranks"]} == {"distributedInfo"}
    by = {r["rank"]: r for r in doc["ranks"]}
    # Ranks 0 and 1 are the same trace; rank 2 is exactly it, stretched 1.6x.
    assert by[0]["attention_us"] == by[1]["attention_us"] > 0
    assert by[2]["attention_us"] == pytest.approx(1.6 * by[0]["attention_us"], rel=1e-3)
    assert doc["slowest"]["rank"] == 2 or by[3]["attention_us"] > by[2]["attention_us"]
    slowest = max(doc["ranks"], key=lambda r: r["attention_us"])
    assert doc["slowest"]["rank"] == slowest["rank"]
    med = sorted(r["attention_us"] for r in doc["ranks"])
    assert doc["median_us"] == pytest.approx((med[1] + med[2]) / 2, rel=1e-6)
    assert doc["imbalance"] == pytest.approx(slowest["attention_us"] / doc["median_us"], rel=1e-3)
    # Stages per rank add up to the rank's attention time.
    for r in doc["ranks"]:
        assert sum(r["stages"].values()) == pytest.approx(r["attention_us"], rel=1e-3, abs=0.01)
    # Rank 3 ran eager attention where the others ran the fused CPU kernel.
    odd = [o for o in doc["odd_ranks"] if o["what"] == "implementation"]
    assert [o["rank"] for o in odd] == [3] and "eager" in odd[0]["value"] and odd[0]["usual"] == "cpu_fused"
    # Per-layer spread: every layer's slowest copy among ranks 0-2 is rank 2's (stretched).
    assert doc["layers"] and all(lay["max_us"] >= lay["median_us"] >= lay["min_us"] for lay in doc["layers"])
    sdpa_layers = {lay.layer for lay in reports[0]["layers"]}
    for lay in doc["layers"]:
        if lay["layer"] in sdpa_layers and lay["ranks"] == 3:
            assert lay["slowest_rank"] == 2
    assert doc["headline"].startswith(f"slowest rank {doc['slowest']['rank']}: attention ")
    assert "× the median" in doc["headline"]


def test_rank_summary_from_worker_names(cpu_traces, tmp_path):
    s = cpu_traces["sdpa"]
    write_job(tmp_path / "job", {r: s for r in range(3)}, by="worker name", slow={1: 2.0}, world_size=4)
    reports = [analyze_file(str(f)) for f in sorted((tmp_path / "job").iterdir())]
    assert all(r["distributed"] == {} for r in reports)
    doc = summarize_ranks(reports)
    assert {r["rank_from"] for r in doc["ranks"]} == {"worker name"}
    assert doc["world_size"] is None  # names do not tell the world size
    assert doc["slowest"]["rank"] == 1 and doc["imbalance"] == pytest.approx(2.0, rel=1e-3)
    assert doc["odd_ranks"] == []
    assert doc["headline"].startswith("slowest rank 1: attention 2× the median")


def test_no_rank_summary_for_one_rank_or_unranked(cpu_traces):
    r = analyze_file(str(cpu_traces["sdpa"]))
    assert summarize_ranks([r]) is None
    assert summarize_ranks([r, r]) is None  # no rank in either: nothing to compare


def test_missing_ranks_are_named(cpu_traces, tmp_path):
    s = cpu_traces["sdpa"]
    write_job(tmp_path / "job", {0: s, 2: s, 5: s}, world_size=8)
    doc = summarize_ranks([analyze_file(str(f)) for f in sorted((tmp_path / "job").iterdir())])
    assert doc["missing_ranks"] == [1, 3, 4, 6, 7] and doc["missing_count"] == 5


def test_cli_names_the_slowest_rank_and_json_carries_the_summary(job_dist, capsys):
    assert cli.main(["report", str(job_dist), "-q"]) == 0
    out = capsys.readouterr().out
    assert "ranks of job: 4 ranks of world size 4" in out
    assert "slowest rank " in out and "× the median" in out
    assert "rank 3 runs implementation eager" in out
    assert cli.main(["report", str(job_dist), "-q", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["reports"]) == 4
    (ranks,) = doc["ranks"]
    assert ranks["run"] == "job" and ranks["rank_count"] == 4 and ranks["slowest"]["rank"] in (2, 3)


def test_cli_json_without_ranks_is_unchanged(cpu_traces, tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.pt.trace.json").write_bytes(cpu_traces["sdpa"].read_bytes())
    assert cli.main(["report", str(tmp_path), "-q", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["reports"]


@pytest.mark.parametrize("ratio,text", [(1.0, "1"), (1.002, "1"), (1.04, "1.04"), (1.56, "1.6"), (2.0, "2"),
                                        (9.96, "10"), (12.3, "12"), (123.4, "123"), (4567.8, "4568")])
def test_headline_ratio_never_in_scientific_notation(ratio, text):
    doc = {"slowest": {"rank": 5, "attention_us": 10.0}, "imbalance": ratio, "median_us": 1.0, "time_basis": "gpu"}
    assert headline(doc).startswith(f"slowest rank 5: attention {text}× the median (")


def test_a_rank_claimed_twice_and_traces_without_a_rank_are_named_not_dropped_silently(cpu_traces, tmp_path, capsys):
    """Two nodes whose worker names carry the local rank (node0_rank0, node1_rank0), and a trace
    with no rank at all: the summary keeps one trace per rank and says which were left out."""
    s = cpu_traces["sdpa"]
    job = tmp_path / "logdir" / "job"
    for node in (0, 1):
        for path in write_job(tmp_path / f"n{node}", {0: s, 1: s}, by="worker name", slow={1: 1.3}).values():
            path.rename(job.mkdir(parents=True, exist_ok=True) or job / path.name.replace("host_", f"node{node}_"))
    (job / "launcher.1.pt.trace.json").write_bytes(s.read_bytes())
    doc = summarize_ranks([analyze_file(str(f)) for f in sorted(job.iterdir())])
    assert doc["rank_count"] == 2 and [r["worker"] for r in doc["ranks"]] == ["node0_rank0", "node0_rank1"]
    assert doc["duplicate_count"] == 2 and doc["duplicate_ranks"] == [
        {"rank": 0, "worker": "node1_rank0", "kept": "node0_rank0", "rank_from": "worker name"},
        {"rank": 1, "worker": "node1_rank1", "kept": "node0_rank1", "rank_from": "worker name"}]
    assert doc["unranked_workers"] == ["launcher"] and doc["unranked_count"] == 1
    assert cli.main(["report", str(tmp_path / "logdir"), "-q"]) == 0
    out = capsys.readouterr().out
    assert ("left out, their rank taken by another trace (2): node1_rank0 (rank 0, kept node0_rank0), "
            "node1_rank1 (rank 1, kept node0_rank1); worker names may carry a node's local rank") in out
    assert "without a rank, left out (1): launcher" in out


def _plain_negative(tmp_path):
    """The recorded MLP trace (tests/recorded.py role "negative"), ungzipped as write_job reads it."""
    import gzip

    from tests.conftest import recorded_trace

    out = tmp_path / "negative.json"
    out.write_bytes(gzip.decompress(recorded_trace("negative").read_bytes()))
    return out


def test_no_slowest_rank_when_no_rank_has_attention(tmp_path):
    """Issue 24 item 9: four ranks of the recorded MLP (log_softmax, no attention) are a job with no
    attention; before, its headline still named "slowest rank 0: the median rank has no attention time"."""
    neg = _plain_negative(tmp_path)
    write_job(tmp_path / "job", {r: neg for r in range(4)}, slow={2: 1.5})
    reports = [analyze_file(str(f)) for f in sorted((tmp_path / "job").iterdir())]
    assert all(r["calls"] == 0 for r in reports)
    doc = summarize_ranks(reports)
    assert doc["slowest"] is None and doc["fastest"] is None and doc["imbalance"] is None
    assert doc["headline"].startswith("no rank has attention: 4 ranks")
    assert "slowest" not in doc["headline"]
    from tb_attn_plugin.ranks.text import render_ranks

    assert "slowest rank" not in render_ranks("job", doc)


def test_slowest_rank_named_when_only_some_ranks_have_attention(cpu_traces, tmp_path):
    """One rank with attention among ranks without: that rank is the slowest, against a median of none."""
    neg = _plain_negative(tmp_path)
    write_job(tmp_path / "job", {0: neg, 1: cpu_traces["sdpa"], 2: neg})
    doc = summarize_ranks([analyze_file(str(f)) for f in sorted((tmp_path / "job").iterdir())])
    assert doc["slowest"]["rank"] == 1
    assert doc["headline"].startswith("slowest rank 1: the median rank has no attention time")
