"""The tab lists every ``*.pt.trace.json[.gz]`` file, as the CLI and torch-tb-profiler read them
(``bert.pt.trace.json.gz`` too, worker from its name), and says which files it skipped and why."""

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


def test_every_pt_trace_file_is_listed_and_skipped_files_are_named(logdir, tb_app):
    client, _ = tb_app(logdir)
    doc = wait_runs(client, all_settled)
    runs = {r["run"]: r for r in doc["runs"]}
    assert sorted(runs) == ["bert", "mixed"]
    assert [(w["worker"], [s["span"] for s in w["spans"]]) for w in runs["bert"]["workers"]] == [("bert", [""])]
    assert sorted(w["worker"] for w in runs["mixed"]["workers"]) == ["model", "w"]
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
