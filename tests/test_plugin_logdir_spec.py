"""``tensorboard --logdir_spec name:path,path``: runs from several roots, a named root's runs listed
as ``name/run`` the way TensorBoard names them."""

from __future__ import annotations

import os
import shutil

import pytest

from tb_attn_plugin.plugin.layout import Source
from tests.conftest import all_settled, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"


def _place(dst, src):
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    os.utime(dst, (1_600_000_000, 1_600_000_000))


def test_spec_parsed_by_tensorboards_rules():
    s = Source.from_spec("eager:/runs/a,/runs/b,/odd:path,s3://bucket/runs,flash:/x:y")
    assert s.roots == (("eager", "/runs/a"), ("", "/runs/b"), ("", "/odd:path"), ("", "s3://bucket/runs"),
                       ("flash", "/x:y"))
    assert not Source.from_spec("") and not Source.from_logdir("")


def test_runs_of_every_root_under_their_group_names(tb_app, tmp_path, recorded_traces):
    a, b = tmp_path / "a", tmp_path / "b"
    _place(a / NAME, recorded_traces / "sdpa.json.gz")  # the root itself is a run
    _place(a / "L1024" / NAME, recorded_traces / "eager.json.gz")
    _place(b / "small" / NAME, recorded_traces / "small.json.gz")
    client, _ = tb_app(None, logdir_spec=f"sdpa:{a},{b}")
    runs = ["sdpa", "sdpa/L1024", "small"]
    doc = wait_runs(client, lambda d: all_settled(d, runs))
    assert sorted(r["run"] for r in doc["runs"]) == runs
    assert "error" not in doc
    flash = client.get(f"{P}/report?run=sdpa")
    assert flash.status_code == 200 and flash.json["calls"] == 2
    assert client.get(f"{P}/report?run=sdpa/L1024").json["implementations"][0]["implementation"] == "eager"
    cmp = client.get(f"{P}/compare?run=sdpa&run=small")
    assert cmp.status_code == 200


def test_a_root_that_cannot_be_listed_is_named(tmp_path):
    (tmp_path / "there").mkdir()
    with pytest.raises(OSError) as err:
        Source.from_spec(f"{tmp_path / 'there'},gone:{tmp_path / 'missing'}").list()
    assert f"gone ({tmp_path / 'missing'})" in str(err.value)
