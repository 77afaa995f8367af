"""The plugin's route answers are what tb_attn_plugin/format/routes.py says (and so what the generated
route_types.ts says): every answer of every JSON route of the real TensorBoard app converts into its
Struct with strict types, no key the Struct lacks, and nothing lost on the way back."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import msgspec
import pytest

from tb_attn_plugin.format import routes
from tb_attn_plugin.format.report import Report
from tests.conftest import OLD, all_settled, gpu_runs_present, make_tb_app, recorded_trace, wait_runs
from tests.memory_snapshots import known_snapshot

P = "/data/plugin/tb_attn"
ROUTE = {"/runs": routes.RunsDoc, "/kernels": routes.KernelsDoc, "/call": routes.CallAnswer,
         "/memory": routes.MemoryDoc, "/compare": routes.CompareDoc, "/report": Report, "/ranks": routes.RanksDoc,
         "/sweeps": routes.SweepsDoc, "/sweep": routes.SweepDoc}


def _place(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (OLD, OLD))


def _is(body: bytes, into) -> dict:
    typed = msgspec.json.decode(body, type=into, strict=True)
    doc = json.loads(body)
    assert msgspec.to_builtins(typed) == doc
    return doc


def answer(client, url: str, seen: set) -> tuple[int, dict]:
    """``url``'s answer, checked against its Struct: 202 a loading answer, 4xx an error, 200 the route's own."""
    r = client.get(url)
    route = url[len(P):].split("?")[0]
    if r.status_code == 202:
        into = routes.WaitingAnswer if route in ("/compare", "/ranks") else routes.LoadingAnswer
    elif r.status_code >= 400:
        into = routes.ErrorAnswer
    else:
        into = ROUTE[route]
    seen.add(into.__name__)
    return r.status_code, _is(r.data, into)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, plugin_logdir):
    root = tmp_path_factory.mktemp("route_logdir")
    shutil.copytree(plugin_logdir, root, dirs_exist_ok=True)
    snap = pickle.dumps(known_snapshot()[0])
    _place(root / "snap" / "w.1.pt.trace.json.gz", recorded_trace("sdpa").read_bytes())
    _place(root / "snap" / "w.1.memory.pickle", snap)  # joins the trace's report
    _place(root / "alone" / "w.1.memory.pickle", snap)  # listed on its own: a memory_snapshot span
    return root


def test_every_route_answers_in_its_format(logdir, tmp_path_factory):
    client, plugins = make_tb_app(logdir, tmp_path_factory.mktemp("cache"))
    seen: set[str] = set()
    try:
        # Asked at once, before the analyses end: the loading answers.
        answer(client, f"{P}/runs", seen)
        for url in (f"{P}/report?run=sdpa", f"{P}/kernels?run=math", f"{P}/memory?run=eager",
                    f"{P}/compare?run=sdpa&run=math", f"{P}/ranks?run=multi"):
            answer(client, url, seen)
        doc = wait_runs(client, all_settled)
        _is(client.get(f"{P}/runs").data, routes.RunsDoc)
        assert any(s.get("summary", {}).get("kind") == "memory_snapshot"
                   for r in doc["runs"] for w in r["workers"] for s in w["spans"])
        gpu = sorted(r["run"] for r in doc["runs"] if r["run"].startswith("gpu/")) if gpu_runs_present() else []
        for run in ["sdpa", "math", "eager", "negative", "group/small", "multi", "snap", *gpu]:
            code, kernels = answer(client, f"{P}/kernels?run={run}", seen)
            assert code == 200 and kernels["run"] == run
            answer(client, f"{P}/kernels?run={run}&stage=fused&pass=fwd", seen)
            code, mem = answer(client, f"{P}/memory?run={run}&points=50", seen)
            assert code == 200
            report = json.loads(client.get(f"{P}/report?run={run}").data)
            for sample in report["call_samples"][:3]:
                code, call = answer(client, f"{P}/call?run={run}&id={sample['id']}", seen)
                assert code == 200 and call["id"] == sample["id"] and "reading" in call
        code, mem = answer(client, f"{P}/memory?run=snap", seen)
        assert code == 200 and mem["memory"] is not None
        code, mem = answer(client, f"{P}/memory?run=alone", seen)
        assert code == 200 and mem["memory"] is not None
        code, mem = answer(client, f"{P}/memory?run=negative", seen)
        assert code == 200 and (mem["memory"] is not None or mem["note"])
        parts = set()
        for runs in (["sdpa", "math"], ["sdpa", "math", "eager", "negative"],
                     *([gpu[:2], gpu, ["gpu/bert_flash", "gpu/owlv2_eager"]] if gpu else [])):
            code, cmp = answer(client, f"{P}/compare?" + "&".join(f"run={r}" for r in runs), seen)
            assert code == 200 and cmp["runs"] == runs
            parts |= {k for k in ("kernel_changes", "memory", "decomposition", "steps", "noise") if cmp[k]}
        # the GPU runs fill every part of a comparison (bert on flash against OWLv2 eager: one kernel change)
        if gpu:
            assert parts == {"kernel_changes", "memory", "decomposition", "steps", "noise"}
        answer(client, f"{P}/compare?run=multi&worker=rank0&run=multi&worker=rank1", seen)
        code, ranks = answer(client, f"{P}/ranks?run=multi", seen)
        assert code == 200 and ranks["rank_count"] == 2 and ranks["headline"]
        code, ranks = answer(client, f"{P}/ranks?run=sdpa", seen)
        assert code == 200 and ranks["not_a_job"]
        code, sweeps = answer(client, f"{P}/sweeps", seen)
        assert code == 200 and sweeps["sweeps"] == []
        for url in ("/compare?run=sdpa", "/call?run=sdpa&id=99999", "/kernels?run=nope", "/memory?run=sdpa&points=1",
                    "/report?run=bad/corrupt", "/nothing", "/call?run=alone&id=0"):
            code, _ = answer(client, P + url, seen)
            assert code >= 400
    finally:
        plugins["tb_attn"].close()
    # every answer Struct but the loading ones (they depend on timing) and the sweep's (below) was met
    assert {r.__name__ for r in routes.ROOTS} - seen <= {"LoadingAnswer", "WaitingAnswer", "SweepDoc"}


def test_sweep_routes_answer_in_their_format(tmp_path_factory):
    """A real sweep (tests/sweep_data.py, torch on the CPU) and a hostile sweep.jsonl."""
    pytest.importorskip("torch")
    from tb_attn_plugin.sweeps import store
    from tests.sweep_data import record_sweep
    from tests.test_plugin_sweep import HOSTILE

    root = tmp_path_factory.mktemp("sweep_logdir")
    records = record_sweep(root / "cpu_sweep")
    (root / "hostile").mkdir()
    (root / "hostile" / store.FILENAME).write_bytes(b"\n".join(HOSTILE) + b"\n")
    client, plugins = make_tb_app(root, tmp_path_factory.mktemp("cache"))
    seen: set[str] = set()
    try:
        profile_runs = {f"cpu_sweep/{r['profile_run']}" for r in records if r.get("profile_run")}
        wait_runs(client, lambda d: profile_runs <= {r["run"] for r in d["runs"]})
        code, listed = answer(client, f"{P}/sweeps", seen)
        assert code == 200 and sorted(s["run"] for s in listed["sweeps"]) == ["cpu_sweep", "hostile"]
        code, sweep = answer(client, f"{P}/sweep?run=cpu_sweep", seen)
        assert code == 200 and len(sweep["cells"]) == len(records) and sweep["analysis"]["best"]
        assert any(c["profile_run"] for c in sweep["cells"])
        code, sweep = answer(client, f"{P}/sweep?run=hostile", seen)
        assert code == 200 and sweep["skipped_lines"] > 0
        code, _ = answer(client, f"{P}/sweep?run=nope", seen)
        assert code == 404
    finally:
        plugins["tb_attn"].close()
