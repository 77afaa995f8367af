"""The plugin's routes, driven through the real TensorBoard WSGI application over a logdir of real
CPU traces the suite records itself (tests/recorded.py), tensorboard_trace_handler runs and bad runs,
plus the shared GPU traces under gpu/ when present. One app (and one analysis of each trace) serves
the whole module."""

from __future__ import annotations

import json
import shutil

import msgspec
import pytest

from tb_attn_plugin.report.build import analyze_file
from tb_attn_plugin.format.version import SCHEMA_VERSION
from tests.conftest import (PLUGIN_BAD_RUNS, PLUGIN_GPU_RUNS, PLUGIN_RUNS, all_settled, gpu_runs_present,
                            make_tb_app, shared_trace, wait_runs)

P = "/data/plugin/tb_attn"
GOOD = sorted(PLUGIN_RUNS) + ["collector_sdpa", "cpu_eager", "cpu_sdpa", "multi"] + (sorted(PLUGIN_GPU_RUNS) if gpu_runs_present() else [])
BAD = sorted(PLUGIN_BAD_RUNS) + ["bad/truncated"]


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, plugin_logdir, handler_runs):
    root = tmp_path_factory.mktemp("module_logdir")
    shutil.copytree(plugin_logdir, root, dirs_exist_ok=True)
    for name, d in handler_runs.items():
        shutil.copytree(d, root / name)
    return root


@pytest.fixture(scope="module")
def app(logdir, tmp_path_factory):
    client, plugins = make_tb_app(logdir, tmp_path_factory.mktemp("cache"))
    doc = wait_runs(client, all_settled)
    yield client, doc
    plugins["tb_attn"].close()


def get(client, url):
    r = client.get(url)
    assert r.status_code != 500, r.data
    if not url.startswith(f"{P}/index.js") and "/static/" not in url:
        assert r.headers["Content-Type"].startswith("application/json"), (url, r.headers["Content-Type"])
    return r.status_code, json.loads(r.data) if r.headers["Content-Type"].startswith("application/json") else r.data


def run_of(doc, name):
    return next(r for r in doc["runs"] if r["run"] == name)


def spans(run):
    return [s for w in run["workers"] for s in w["spans"]]


# -- /runs -----------------------------------------------------------------------------------

def test_runs_lists_every_trace_directory_and_nothing_else(app):
    _, doc = app
    assert sorted(r["run"] for r in doc["runs"]) == sorted(GOOD + BAD)  # no .hidden, no notes.json


def test_runs_have_workers_and_spans_as_trace_handler_names_them(app, logdir):
    _, doc = app
    multi = run_of(doc, "multi")
    assert [(w["worker"], [s["span"] for s in w["spans"]]) for w in multi["workers"]] == [
        ("rank0", ["100", "200"]), ("rank1", ["100"])]
    for name in ("cpu_sdpa", "cpu_eager"):
        run = run_of(doc, name)
        assert [w["worker"] for w in run["workers"]] == ["trainer0"]
        got = [s["span"] for s in run["workers"][0]["spans"]]
        assert len(got) == 2 and got == sorted(got, key=int)
    s = spans(run_of(doc, "sdpa"))[0]
    assert s["size_bytes"] == (logdir / "sdpa" / "host_1.1700000000000000001.pt.trace.json.gz").stat().st_size


def test_runs_status_ready_for_good_runs_with_collector_metadata(app):
    _, doc = app
    for name in GOOD:
        run = run_of(doc, name)
        assert run["status"] == "ready" and all(s["status"] == "ready" for s in spans(run)), run
    assert run_of(doc, "cpu_eager")["metadata"]["variant"] == "eager"
    assert run_of(doc, "cpu_sdpa")["metadata"]["seq_len"] == 32
    assert run_of(doc, "sdpa")["metadata"] == {}
    collector = run_of(doc, "collector_sdpa")
    assert collector["metadata"]["variant"] == "collector-sdpa" and len(spans(collector)) == 1  # its tfevents file is not a span
    assert spans(collector)[0]["summary"]["calls"] >= 2  # two tagged SDPA layers
    assert spans(run_of(doc, "sdpa"))[0]["summary"]["implementations"] == ["cpu_fused"]
    assert spans(run_of(doc, "math"))[0]["summary"]["implementations"] == ["math"]


@pytest.mark.parametrize("run,cause", [
    ("bad/corrupt", "gzip"), ("bad/empty", "empty"), ("bad/not_a_trace", "not a trace"),
    ("bad/not_json", "not JSON"), ("bad/truncated", "incomplete")])
def test_bad_runs_are_errors_with_a_message_naming_file_and_cause(app, run, cause):
    client, doc = app
    s = spans(run_of(doc, run))[0]
    assert s["status"] == "error"
    assert s["message"].startswith(f"{run}/host_1.1.pt.trace.json") and cause in s["message"], s["message"]
    code, body = get(client, f"{P}/report?run={run}")
    assert code == 422 and body["error"] == s["message"]


# -- /report ---------------------------------------------------------------------------------

def test_report_is_the_engines_report(app, logdir):
    client, _ = app
    code, body = get(client, f"{P}/report?run=sdpa")
    assert code == 200
    # the engine's report as JSON builtins (its layers are Structs in-process)
    direct = msgspec.to_builtins(analyze_file(str(logdir / "sdpa" / "host_1.1700000000000000001.pt.trace.json.gz")))
    body.pop("analysis_seconds"), direct.pop("analysis_seconds")
    # The plugin names the file relative to the logdir: the server's own paths never reach a browser.
    assert body["source"].pop("path") == "sdpa/host_1.1700000000000000001.pt.trace.json.gz"
    assert direct["source"].pop("path").endswith("/sdpa/host_1.1700000000000000001.pt.trace.json.gz")
    assert body == direct
    assert body["calls"] == 2 and [i["implementation"] for i in body["implementations"]] == ["cpu_fused"]


def test_report_defaults_to_first_worker_and_latest_span(app):
    client, _ = app
    _, body = get(client, f"{P}/report?run=multi")
    assert (body["source"]["worker"], body["source"]["span"]) == ("rank0", "200")
    _, body = get(client, f"{P}/report?run=multi&worker=rank0&span=100")
    assert body["source"]["span"] == "100"
    _, body = get(client, f"{P}/report?run=multi&worker=rank1")
    assert (body["source"]["worker"], body["source"]["span"]) == ("rank1", "100")


def test_report_of_the_negative_control_has_no_attention(app):
    client, _ = app
    code, body = get(client, f"{P}/report?run=negative")
    assert code == 200 and body["calls"] == 0 and body["attention_cpu_us"] == 0 and body["total_cpu_us"] > 0


HOSTILE = [
    ("run=../../etc/passwd", 404), ("run=/etc/passwd", 404), ("run=sdpa/../../../etc", 404),
    ("run=sdpa%00", 400), ("run=" + "a" * 100_000, 400), ("run=", 400), ("", 400),
    ("run=sdpa&run=multi", 400), ("run=nope", 404), ("run=%E2%98%83", 404),
    ("run=sdpa&worker=../../x", 404), ("run=sdpa&worker=host_2", 404),
    ("run=sdpa&span=1", 404), ("run=sdpa&span=" + "9" * 5000, 400),
    ("run=multi&worker=rank0&span=100&span=200", 400),
]


@pytest.mark.parametrize("route", ["report", "kernels", "call"])
@pytest.mark.parametrize("query,code", HOSTILE)
def test_hostile_parameters_get_clear_json_errors(app, route, query, code):
    client, _ = app
    if route == "call" and "id=" not in query:
        query += "&id=0"
    got, body = get(client, f"{P}/{route}?{query}")
    assert got == code, body
    assert isinstance(body["error"], str) and 10 < len(body["error"]) < 2000
    assert "Traceback" not in body["error"]


def test_a_real_file_path_is_not_a_run_name(app, logdir):
    client, _ = app
    path = logdir / "sdpa" / "host_1.1700000000000000001.pt.trace.json.gz"
    code, body = get(client, f"{P}/report?run={path}")
    assert code == 404 and "no run named" in body["error"]
    code, body = get(client, f"{P}/report?run={path.parent}")
    assert code == 404


def test_unknown_run_error_lists_known_runs(app):
    client, _ = app
    _, body = get(client, f"{P}/report?run=sdpaa")
    assert "no run named 'sdpaa'" in body["error"] and "'sdpa'" in body["error"]


def test_other_runs_keep_working_after_errors(app):
    client, _ = app
    for q, _ in HOSTILE:
        client.get(f"{P}/report?{q}")
    for run in BAD:
        client.get(f"{P}/report?run={run}")
    for run in GOOD:
        code, body = get(client, f"{P}/report?run={run}")
        assert code == 200 and body["schema_version"] == SCHEMA_VERSION


# -- /kernels and /call ----------------------------------------------------------------------

def test_kernels_filtered_by_stage_and_pass(app):
    client, _ = app
    _, report = get(client, f"{P}/report?run=eager")
    _, all_k = get(client, f"{P}/kernels?run=eager")
    assert all_k["kernels"] == report["kernels"] and all_k["time_basis"] == "cpu"
    _, bwd = get(client, f"{P}/kernels?run=cpu_eager&pass=bwd")
    assert bwd["kernels"] == [k for k in get(client, f"{P}/report?run=cpu_eager")[1]["kernels"] if k["pass"] == "bwd"]
    code, body = get(client, f"{P}/kernels?run=eager&stage=attention")
    assert code == 400 and "qk_matmul" in body["error"]
    code, body = get(client, f"{P}/kernels?run=eager&pass=sideways")
    assert code == 400 and "fwd" in body["error"]


def test_call_returns_one_call_sample(app):
    client, _ = app
    _, report = get(client, f"{P}/report?run=sdpa")
    sample = report["call_samples"][-1]
    code, body = get(client, f"{P}/call?run=sdpa&id={sample['id']}")
    reading = body.pop("reading")
    assert code == 200 and body == sample and body["events"]
    # The Reading panel is the report's own reading of that call's layer type × implementation.
    layer = next(lay for lay in report["layers"] if lay["layer"] == sample["layer"])
    group = next(g for g in report["reading"]
                 if (g["layer_type"], g["implementation"]) == (layer["layer_type"], sample["implementation"]))
    assert (reading["layer"], reading["layer_type"], reading["calls"]) == (sample["layer"], layer["layer_type"], group["calls"])
    assert reading["expected"] == group["expected"] and reading["expected"]["ran"] >= 1
    assert reading["host"] == group["host"] and reading["host"]["host_us_per_call"] > 0
    assert reading["why_not_flash"] == layer["why_not_flash"]
    # a CPU call that ran the CPU flash kernel (float32 is one of its dtypes): judged by the CPU's rules, not refused
    (flash,) = reading["why_not_flash"]["backends"]
    assert flash["backend"] == "flash_cpu" and flash["eligible"] is not False and flash["refusals"] == []
    # a CPU trace: no kernel to decode, GPU time unknown; each said with its reason, never a 0
    assert reading["kernels"] == [] and "CPU only" in reading["unknown"]["kernels"]
    assert reading["host"]["gpu_us_per_call"] is None and "no GPU activity" in reading["unknown"]["gpu"]
    assert "forward only" in reading["unknown"]["backward"]


def test_call_reading_of_a_gpu_call(app):
    """Fingerprints, occupancy and host vs GPU of the H100 flash call, as the report has them."""
    shared_trace(PLUGIN_GPU_RUNS["gpu/bert_flash"])
    client, _ = app
    _, report = get(client, f"{P}/report?run=gpu/bert_flash")
    _, body = get(client, f"{P}/call?run=gpu/bert_flash&id=0")
    r = body["reading"]
    names = [e["name"] for e in body["events"] if e["kind"] == "kernel"]
    assert [k["name"] for k in r["kernels"]] == list(dict.fromkeys(names))
    fps = report["kernel_reading"]["fingerprints"]
    layer = next(lay for lay in report["layers"] if lay["layer"] == body["layer"])
    occ = {o["name"]: o for o in layer["occupancy"]}
    for k in r["kernels"]:
        assert k["fingerprint"] == fps[k["name"]] and k["occupancy"] == occ[k["name"]]
        assert k["us"] == pytest.approx(sum(e["dur_us"] for e in body["events"] if e["name"] == k["name"]), abs=0.01)
    flash = next(k for k in r["kernels"] if "flash_fwd_kernel" in k["name"])
    assert flash["fingerprint"]["library"] == "FlashAttention" and flash["occupancy"]["theoretical_pct"] == 12.5
    assert "low by design" in flash["occupancy"]["reading"]
    assert r["host"]["host_bound"] is True and r["host"]["host_us_per_call"] > r["host"]["gpu_us_per_call"] > 0
    assert "gpu" not in r["unknown"] and "kernels" not in r["unknown"]


@pytest.mark.parametrize("query,code,says", [
    ("run=sdpa&id=99999", 404, "no call sample 99999"),
    ("run=negative&id=0", 404, "no attention calls"),
    ("run=sdpa&id=-1", 400, "integer"),
    ("run=sdpa&id=abc", 400, "integer"),
    ("run=sdpa&id=" + "9" * 40, 400, "integer"),
    ("run=sdpa", 400, "missing parameter 'id'"),
])
def test_call_errors(app, query, code, says):
    client, _ = app
    got, body = get(client, f"{P}/call?{query}")
    assert got == code and says in body["error"], body


# -- /compare --------------------------------------------------------------------------------

def test_compare_two_cpu_runs(app):
    client, _ = app
    code, body = get(client, f"{P}/compare?run=sdpa&run=math")
    assert code == 200
    assert body["runs"] == ["sdpa", "math"] and body["time_basis"] == "cpu"
    deltas = [abs(s["delta_us"]) for s in body["stages"]]
    assert deltas == sorted(deltas, reverse=True)
    for s in body["stages"]:
        assert s["delta_us"] == pytest.approx(s["values"][1] - s["values"][0], abs=1e-3)
    fused = next(s for s in body["stages"] if s["stage"] == "fused" and s["pass"] == "fwd")
    assert fused["values"][0] > 0 and fused["values"][1] == 0  # math runs no fused kernel
    assert "math vs sdpa" in body["summary"] and "cpu_fused -> math" in body["summary"]
    assert [t["run"] for t in body["totals"]] == body["runs"]


def test_gpu_runs_keep_their_measured_facts(app):
    """The shared GPU traces' facts (their README) through the plugin: skips without them."""
    for name in PLUGIN_GPU_RUNS.values():
        shared_trace(name)
    client, _ = app
    _, body = get(client, f"{P}/report?run=gpu/bert_flash")
    assert body["calls"] == 4 and [i["implementation"] for i in body["implementations"]] == ["flash"]
    _, soft = get(client, f"{P}/kernels?run=gpu/owlv2_eager&stage=softmax")
    assert soft["kernels"] and all(k["stage"] == "softmax" for k in soft["kernels"])
    assert sum(k["count"] for k in soft["kernels"]) == 180
    code, body = get(client, f"{P}/compare?run=gpu/bert_flash&run=gpu/bert_aotriton")
    assert code == 200 and body["time_basis"] == "gpu"
    fused = next(s for s in body["stages"] if s["stage"] == "fused")
    assert fused["values"] == pytest.approx([37.408, 113.656], abs=0.05)
    assert [k["name"] for k in body["kernels_only_in"]["gpu/bert_aotriton"] if k["stage"] == "fused"] == ["attn_fwd"]
    assert any("flash_fwd_kernel" in k["name"] for k in body["kernels_only_in"]["gpu/bert_flash"])
    layer = body["layers"][0]
    assert layer["layer_type"] == "BertAttention" and layer["implementations"] == ["flash", "aotriton"]
    assert "flash -> aotriton" in body["summary"]
    # A GPU run next to CPU-only runs: compared on CPU time, and it says so.
    _, body = get(client, f"{P}/compare?run=gpu/bert_flash&run=cpu_sdpa&run=cpu_eager")
    assert body["time_basis"] == "cpu" and "CPU" in body["time_basis_note"]
    assert all(len(s["values"]) == 3 for s in body["stages"])


@pytest.mark.parametrize("query,code", [
    ("run=sdpa", 400), ("", 400), ("run=sdpa&run=sdpa", 400),
    ("run=sdpa&run=../x", 404), ("run=sdpa&run=bad/corrupt", 422),
    ("&".join(f"run=r{i}" for i in range(9)), 400), ("run=sdpa&run=" + "x" * 10_000, 400),
])
def test_compare_errors(app, query, code):
    client, _ = app
    got, body = get(client, f"{P}/compare?{query}")
    assert got == code and body["error"], body


# -- TensorBoard integration -----------------------------------------------------------------

def test_plugin_listing(app):
    client, _ = app
    r = client.get("/data/plugins_listing")
    entry = json.loads(r.data)["tb_attn"]
    assert entry["enabled"] is True and entry["tab_name"] == "Attention"
    assert entry["loading_mechanism"] == {"type": "IFRAME", "module_path": f"{P}/index.js"}


def test_runs_is_cached_between_requests(app):
    client, _ = app
    a, b = client.get(f"{P}/runs"), client.get(f"{P}/runs")
    assert a.data == b.data and a.headers["Content-Type"].startswith("application/json")


# -- static files ----------------------------------------------------------------------------

@pytest.fixture
def static_dir(tmp_path, monkeypatch):
    """A stand-in static/ folder (the real one belongs to the frontend build), next to a file that
    must never be served."""
    from tb_attn_plugin.plugin import plugin as plugin_mod

    d = tmp_path / "pkg" / "static"
    (d / "sub").mkdir(parents=True)
    (d / "index.js").write_text("export function render() {}\n")
    (d / "style.css").write_text("body { color: black }\n")
    (d / "sub" / "chart.js").write_text("export const x = 1;\n")
    (tmp_path / "pkg" / "secret.py").write_text("SECRET = 1\n")
    monkeypatch.setattr(plugin_mod, "STATIC_DIR", str(d))
    return d


def test_static_files_with_content_types(app, static_dir):
    client, _ = app
    for url, ctype, path in [(f"{P}/index.js", "text/javascript", "index.js"),
                             (f"{P}/static/style.css", "text/css", "style.css"),
                             (f"{P}/static/sub/chart.js", "text/javascript", "sub/chart.js")]:
        r = client.get(url)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(ctype), url
        assert r.data == (static_dir / path).read_bytes()
        assert r.headers.get("X-Content-Type-Options") == "nosniff"


@pytest.mark.parametrize("path", [
    "static/../secret.py", "static/%2e%2e/secret.py", "static/..%2fsecret.py", "static/sub/../../secret.py",
    "static//etc/passwd", "static/%2fetc%2fpasswd", "static/", "static/sub", "static/missing.js",
    "static/..\\secret.py", "static/" + "a" * 5000])
def test_static_refuses_anything_outside_static(app, static_dir, path):
    client, _ = app
    r = client.get(f"{P}/{path}")
    assert r.status_code == 404, (path, r.data[:200])
    assert b"SECRET" not in r.data
    # Ours is JSON; a path TensorBoard's router does not send to the plugin at all is its own 404.
    assert r.headers["Content-Type"].startswith("application/json") or r.data == b"Not found"


def test_missing_frontend_is_a_json_404(app, tmp_path, monkeypatch):
    from tb_attn_plugin.plugin import plugin as plugin_mod

    monkeypatch.setattr(plugin_mod, "STATIC_DIR", str(tmp_path / "empty"))
    code, body = get(app[0], f"{P}/index.js")
    assert code == 404 and "index.js is missing" in body["error"]


# -- fuzzing ---------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_names = st.one_of(st.sampled_from(["sdpa", "multi", "bad/corrupt", "..", "/", "%2e%2e", "rank0", "200",
                                    "softmax", "fwd", "0"]), st.text(max_size=40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(["report", "kernels", "call", "compare", "runs"]),
       params=st.lists(st.tuples(st.sampled_from(["run", "worker", "span", "id", "stage", "pass", "x"]), _names),
                       max_size=5))
def test_any_parameters_get_json_never_a_500(app, route, params):
    from urllib.parse import urlencode

    client, _ = app
    r = client.get(f"{P}/{route}?{urlencode(params)}")
    assert r.status_code in (200, 202, 400, 404, 422), (params, r.status_code, r.data[:300])
    body = json.loads(r.data)
    assert r.headers["Content-Type"].startswith("application/json")
    if r.status_code >= 400:
        assert isinstance(body["error"], str) and body["error"]
