"""The tab lists every ``*.pt.trace.json[.gz]`` file, as the CLI and torch-tb-profiler read them
(``bert.pt.trace.json.gz`` too: worker and span from the trace's head where the name lacks them, else
from its name, with the reason), and says which files it skipped and why."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from tests.conftest import OLD, all_settled, recorded_trace, wait_runs

P = "/data/plugin/tb_attn"


def _place(dst, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    os.utime(dst, (OLD, OLD))


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logdir"
    sdpa = recorded_trace("sdpa").read_bytes()
    _place(root / "bert" / "bert.pt.trace.json.gz", sdpa)
    _place(root / "mixed" / "w.1.pt.trace.json.gz", recorded_trace("eager").read_bytes())
    _place(root / "mixed" / "model.pt.trace.json", gzip.decompress(sdpa))
    _place(root / "mixed" / "model.pt.trace.json.gz", sdpa)  # same worker and span as the .json: skipped, said
    _place(root / "loose" / "trace.json.gz", sdpa)  # the CLI reads it; the tab does not parse plain JSON names
    os.mkfifo(root / "mixed" / "pipe.pt.trace.json")
    outside = tmp_path / "outside.pt.trace.json.gz"
    outside.write_bytes(sdpa)
    (root / "mixed" / "link.pt.trace.json.gz").symlink_to(outside)
    return root


def sdpa_bytes() -> bytes:
    return recorded_trace("sdpa").read_bytes()


def test_every_pt_trace_file_is_listed_and_skipped_files_are_named(logdir, tb_app):
    client, _ = tb_app(logdir)
    doc = wait_runs(client, all_settled)
    runs = {r["run"]: r for r in doc["runs"]}
    assert sorted(runs) == ["bert", "mixed"]
    # The recorded trace's head names its host and process (kineto's host_name, the pid) and its start.
    [(worker, spans)] = [(w["worker"], w["spans"]) for w in runs["bert"]["workers"]]
    assert worker.startswith(gzip.decompress(sdpa_bytes()).split(b'"host_name": "')[1].split(b'"')[0].decode() + "_")
    assert len(spans) == 1 and spans[0]["span"].isdigit() and spans[0]["file"] == "bert/bert.pt.trace.json.gz"
    assert "host_name and pid" in spans[0]["named"]
    assert sorted(w["worker"] for w in runs["mixed"]["workers"]) == sorted(["w", worker])
    assert all(s["status"] == "ready" for r in doc["runs"] for w in r["workers"] for s in w["spans"])
    report = json.loads(client.get(f"{P}/report?run=bert").data)
    assert report["calls"] > 0 and report["source"]["path"] == "bert/bert.pt.trace.json.gz"
    skipped = {k["file"]: k["reason"] for k in doc["skipped"]}
    assert doc["skipped_count"] == len(skipped) == 4, skipped
    assert "not named *.pt.trace.json[.gz]" in skipped["loose/trace.json.gz"]
    assert "not a regular file" in skipped["mixed/pipe.pt.trace.json"]
    assert "link that leads out of it" in skipped["mixed/link.pt.trace.json.gz"]
    assert "the same worker and span as model.pt.trace.json" in skipped["mixed/model.pt.trace.json.gz"]
    assert str(logdir) not in json.dumps(doc)


@pytest.fixture(scope="module")
def nameless(tmp_path_factory):
    """tests/recorded.record_nameless, recorded in a subprocess (the test process never imports torch)."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("nameless")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {repo!r}); "
                    f"from tests.recorded import record_nameless; record_nameless({str(out)!r})"],
                   check=True, timeout=300, capture_output=True)
    return {p.name.split(".")[0]: p.read_bytes() for p in out.glob("*.json.gz")}


def test_nameless_traces_of_two_ranks_are_two_workers(nameless, tmp_path, tb_app):
    """A real two-process gloo job exported with export_chrome_trace under names without rank or
    time: distributedInfo in each trace's head makes them ranks 0 and 1, whatever the names say."""
    root = tmp_path / "logdir"
    _place(root / "job" / "bert_a.pt.trace.json.gz", nameless["rank1"])
    _place(root / "job" / "bert_b.pt.trace.json.gz", nameless["rank0"])
    client, _ = tb_app(root)
    doc = wait_runs(client, all_settled)
    [run] = doc["runs"]
    workers = {w["worker"]: w["spans"] for w in run["workers"]}
    assert sorted(workers) == ["rank0", "rank1"]
    assert [s["file"] for s in workers["rank0"]] == ["job/bert_b.pt.trace.json.gz"]
    assert all(len(v) == 1 and v[0]["span"].isdigit() and v[0]["status"] == "ready" for v in workers.values())
    assert "distributedInfo (rank 1 of 2)" in workers["rank1"][0]["named"]
    ranks = json.loads(client.get(f"{P}/ranks?run=job").data)
    assert sorted(r["rank"] for r in ranks["ranks"]) == [0, 1], ranks


def test_two_spans_of_one_worker_are_ordered_by_the_traces_own_time(nameless, tmp_path, tb_app):
    """Two profiles of one process, named so that the names sort the other way round: one worker
    (host_name and pid), two spans in recording order, the later one shown by default."""
    root = tmp_path / "logdir"
    _place(root / "steps" / "a_second.pt.trace.json.gz", nameless["second"])
    _place(root / "steps" / "b_first.pt.trace.json.gz", nameless["first"])
    client, _ = tb_app(root)
    doc = wait_runs(client, all_settled)
    [w] = doc["runs"][0]["workers"]
    assert [s["file"] for s in w["spans"]] == ["steps/b_first.pt.trace.json.gz", "steps/a_second.pt.trace.json.gz"]
    assert w["default_span"] == w["spans"][1]["span"]
    report = json.loads(client.get(f"{P}/report?run=steps").data)
    assert report["source"]["file"] == "a_second.pt.trace.json.gz"  # the sdpa profile, recorded second
    first = json.loads(client.get(f"{P}/report?run=steps&worker={w['worker']}&span={w['spans'][0]['span']}").data)
    assert first["source"]["file"] == "b_first.pt.trace.json.gz"


def test_a_bad_head_keeps_the_name_based_rule_and_says_why(tmp_path, tb_app):
    root = tmp_path / "logdir"
    _place(root / "odd" / "junk.pt.trace.json", b"hello, world")
    _place(root / "odd" / "deep.pt.trace.json", b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b', "traceEvents": []}')
    client, _ = tb_app(root)
    doc = wait_runs(client, all_settled)
    spans = {w["worker"]: w["spans"] for r in doc["runs"] for w in r["workers"]}
    assert sorted(spans) == ["deep", "junk"]
    assert [s["span"] for s in spans["junk"]] == [""] and "no traceEvents" in spans["junk"][0]["named"]
    assert "not a JSON object's keys" in spans["deep"][0]["named"]
    assert spans["junk"][0]["status"] == "error"  # listed, then analysed: its error is the analysis's
    assert client.get(f"{P}/report?run=odd&worker=junk&span=").status_code < 500


def test_copies_of_one_recording_under_two_names_are_listed_once(nameless, tmp_path, tb_app):
    """Two names, one recording (the same worker and start time inside): one span, the copy named as skipped."""
    root = tmp_path / "logdir"
    _place(root / "run" / "bert.pt.trace.json.gz", nameless["first"])
    _place(root / "run" / "bert_copy.pt.trace.json.gz", nameless["first"])
    client, _ = tb_app(root)
    doc = wait_runs(client, all_settled)
    assert [s["file"] for w in doc["runs"][0]["workers"] for s in w["spans"]] == ["run/bert.pt.trace.json.gz"]
    [k] = doc["skipped"]
    assert k["file"] == "run/bert_copy.pt.trace.json.gz" and "copies of one recording" in k["reason"]
