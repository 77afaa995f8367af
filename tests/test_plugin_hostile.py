"""Hostile logdirs and requests by class, through the real TensorBoard WSGI app: numeric parameters
in any Unicode digit, methods other than GET/HEAD, symlinks out of the logdir, run names longer
than the old parameter limit, and the server's own paths in what a browser receives."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import OLD, all_settled, make_tb_app, wait_runs

P = "/data/plugin/tb_attn"
NAME = "host_1.1700000000000000001.pt.trace.json.gz"
# Three nested directories of 200 characters: a 600-character run name (the old limit was 512).
LONG = "/".join(c * 200 for c in "xyz")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, recorded_traces):
    tmp_path = tmp_path_factory.mktemp("hostile")
    root = tmp_path / "logdir"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / NAME).write_bytes(recorded_traces.joinpath("sdpa.json.gz").read_bytes())  # a real trace, elsewhere
    (outside / "secret.txt").write_bytes(b"password=hunter2\n" * 37)
    for run in ("good", LONG):
        (root / run).mkdir(parents=True)
        (root / run / NAME).write_bytes(recorded_traces.joinpath("small.json.gz").read_bytes())
    (root / "links").mkdir()
    os.symlink(outside / NAME, root / "links" / "out.1.pt.trace.json.gz")  # a trace outside: not followed
    os.symlink(outside / "secret.txt", root / "links" / "secret.1.pt.trace.json")  # its size must not show
    os.symlink(root / "good" / NAME, root / "links" / "in.1.pt.trace.json.gz")  # inside the logdir: followed
    os.symlink("/dev/zero", root / "links" / "zero.1.pt.trace.json")  # a device: not a file
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            os.utime(f, (OLD, OLD))
    client, plugins = make_tb_app(root, tmp_path / "cache")
    doc = wait_runs(client, lambda d: all_settled(d, ["good", "links", LONG]))
    yield client, doc, root, outside
    plugins["tb_attn"].close()


def test_symlinks_out_of_the_logdir_are_not_followed(hostile):
    client, doc, _, outside = hostile
    links = next(r for r in doc["runs"] if r["run"] == "links")
    assert [w["worker"] for w in links["workers"]] == ["in"]  # only the link that stays inside
    body = client.get(f"{P}/runs").data
    # the link's own name is listed as skipped (it is in the logdir); its target's name, size and bytes never
    assert b"secret.txt" not in body and b"password" not in body
    assert str((outside / "secret.txt").stat().st_size).encode() not in body
    assert b"outside" not in body
    assert client.get(f"{P}/report?run=links&worker=out").status_code == 404
    assert client.get(f"{P}/report?run=links&worker=in").status_code == 200


def test_a_run_name_longer_than_512_characters_is_listed_and_opens(hostile):
    client, doc, _, _ = hostile
    run = next(r for r in doc["runs"] if r["run"] == LONG)
    assert run["status"] == "ready"
    r = client.get(f"{P}/report?run={LONG}")
    assert r.status_code == 200 and r.json["calls"] == 1
    assert client.get(f"{P}/call?run={LONG}&id=0").status_code == 200
    assert client.get(f"{P}/report?run=" + "x" * 5000).status_code == 400  # past PATH_MAX: refused as before


def test_no_absolute_server_path_reaches_the_browser(hostile):
    client, doc, root, _ = hostile
    for run in ("good", "links", LONG):
        body = client.get(f"{P}/report?run={run}").data
        assert str(root).encode() not in body
        assert json.loads(body)["source"]["path"] == f"{run}/{json.loads(body)['source']['file']}"
    assert str(root).encode() not in client.get(f"{P}/runs").data
    assert str(root).encode() not in client.get(f"{P}/call?run=good&id=0").data
    assert str(root).encode() not in client.get(f"{P}/compare?run=good&run=links").data


@pytest.mark.parametrize("value", ["²", "①", "٣", "߁", "𝟡", "+1", " 1", "1.0", "0x1", "1_000", "-0", "¹²"])
def test_numeric_parameters_are_ascii_digits_only(hostile, value):
    client, _, _, _ = hostile
    from urllib.parse import quote

    r = client.get(f"{P}/call?run=good&id={quote(value)}")
    assert r.status_code == 400, (value, r.status_code, r.data)
    assert "ASCII digits" in r.json["error"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
@pytest.mark.parametrize("route", ["runs", "report?run=good", "call?run=good&id=0", "compare?run=good&run=links",
                                   "kernels?run=good", "index.js"])
def test_only_get_and_head(hostile, method, route):
    client, _, _, _ = hostile
    r = client.open(f"{P}/{route}", method=method, data=b"x=1")
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD", (method, route, r.status_code)
    assert "only answer GET and HEAD" in r.json["error"]


def test_head_answers_like_get(hostile):
    client, _, _, _ = hostile
    r = client.head(f"{P}/report?run=good")
    assert r.status_code == 200 and r.data == b""
