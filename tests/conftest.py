"""Shared fixtures: the real GPU traces in ../shared/traces and CPU traces recorded here with torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# Under CI (CI set, as .ci/run's callers do) the property tests draw the same examples every run and
# keep no example database: a failure found once on a machine cannot fail every later run there, and
# a clean clone runs what the last one ran. Elsewhere hypothesis draws new examples and keeps failures.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
SHARED_TRACES = Path(os.environ.get("TB_ATTN_SHARED_TRACES", REPO.parent / "shared" / "traces"))


def shared_trace(name: str) -> Path:
    p = SHARED_TRACES / f"{name}.json.gz"
    if not p.exists():
        pytest.skip(f"shared trace {p} not present: this checks facts of that GPU trace; "
                    "run with TB_ATTN_SHARED_TRACES=<dir of the shared traces> to include it")
    return p


def session_processes(sid: int) -> list[str]:
    """The processes of session ``sid`` (a script started with start_new_session), itself excluded: what a
    test of interrupts checks is left behind (reads /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == sid:
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    out.append(fh.read().replace(b"\0", b" ").decode(errors="replace")[:120])
        except (OSError, IndexError, ValueError):
            pass
    return out


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} not present: set TB_ATTN_SHARED_TRACES to the shared GPU traces")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory) -> dict[str, Path]:
    """Training steps (forward and backward) of small models, profiled with plain torch.profiler."""
    pytest.importorskip("torch")
    from tests.cpu_models import record_all

    return record_all(tmp_path_factory.mktemp("cpu_traces"))


# --- TensorBoard plugin fixtures (tests/test_plugin*.py) -------------------------------------

# Traces laid out as tensorboard_trace_handler writes them: {logdir}/{run}/{worker}.{span}.pt.trace.json.gz.
# Recorded by the suite itself (tests/recorded.py), so the plugin tests run in any clone.
PLUGIN_RUNS = {
    "sdpa": "sdpa",
    "math": "math",
    "eager": "eager",
    "negative": "negative",
    "group/small": "small",
}
# The real GPU traces, added under gpu/ when ../shared/traces is present (TB_ATTN_SHARED_TRACES):
# only the tests of their particular facts use them, and skip without them.
PLUGIN_GPU_RUNS = {
    "gpu/bert_flash": "tl_h100_bert_small_sdpa_flash",
    "gpu/bert_aotriton": "tl_mi300x_bert_small_sdpa_aotriton",
    "gpu/owlv2_eager": "tl_h100_owlv2_eager_bmm_softmax",
}
# Inputs that must fail alone, with a message, while every other run keeps working.
PLUGIN_BAD_RUNS = {
    "bad/corrupt": b"\x1f\x8b\x08\x00garbage that is not deflate data at all" * 20,
    "bad/empty": b"",
    "bad/not_a_trace": b'{"hello": "world", "numbers": [1, 2, 3]}',
    "bad/not_json": b"this is plain text, not JSON\n",
}
OLD = 1_600_000_000  # mtime for fixture files: long settled, so analysis starts at once


def _place(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    os.utime(dst, (OLD, OLD))


_RECORDED: list[Path] = []


def recorded_trace(role: str) -> Path:
    """``{role}.json.gz`` of tests/recorded.py: small real CPU traces, recorded once per session in a
    subprocess (the test process never imports torch); usable outside fixtures too."""
    import atexit
    import importlib.util
    import shutil
    import subprocess
    import sys
    import tempfile

    if not _RECORDED:
        if importlib.util.find_spec("torch") is None:
            pytest.skip("torch is not installed")
        root = Path(tempfile.mkdtemp(prefix="tb-attn-recorded-"))
        atexit.register(shutil.rmtree, root, True)
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                        f"from tests.recorded import record_roles; record_roles({str(root)!r})"],
                       check=True, timeout=300, capture_output=True)
        _RECORDED.append(root)
    return _RECORDED[0] / f"{role}.json.gz"


@pytest.fixture(scope="session")
def recorded_traces() -> Path:
    """The directory of recorded_trace(): ``{role}.json.gz`` for each role of tests/recorded.py."""
    return recorded_trace("small").parent


def gpu_runs_present() -> bool:
    return all((SHARED_TRACES / f"{n}.json.gz").exists() for n in PLUGIN_GPU_RUNS.values())


@pytest.fixture(scope="session")
def plugin_logdir(tmp_path_factory, recorded_traces) -> Path:
    """A logdir of real runs, one multi-worker multi-span run, nested runs and bad runs (and the
    shared GPU runs under gpu/ when present)."""
    root = tmp_path_factory.mktemp("logdir")
    for run, role in PLUGIN_RUNS.items():
        _place(root / run / "host_1.1700000000000000001.pt.trace.json.gz", (recorded_traces / f"{role}.json.gz").read_bytes())
    if gpu_runs_present():
        for run, name in PLUGIN_GPU_RUNS.items():
            _place(root / run / "host_1.1700000000000000001.pt.trace.json.gz", (SHARED_TRACES / f"{name}.json.gz").read_bytes())
    small = (recorded_traces / "small.json.gz").read_bytes()
    sdpa = (recorded_traces / "sdpa.json.gz").read_bytes()
    _place(root / "multi" / "rank0.100.pt.trace.json.gz", small)
    _place(root / "multi" / "rank0.200.pt.trace.json.gz", sdpa)
    _place(root / "multi" / "rank1.100.pt.trace.json.gz", small)
    for run, data in PLUGIN_BAD_RUNS.items():
        _place(root / run / "host_1.1.pt.trace.json", data)
    # A gzip stream cut in half, as a copy interrupted mid-way leaves it.
    _place(root / "bad" / "truncated" / "host_1.1.pt.trace.json.gz", sdpa[: len(sdpa) // 2])
    # Not trace files by name: must be ignored, never parsed.
    _place(root / "sdpa" / "notes.json", b"{}")
    _place(root / ".hidden" / "host_1.1.pt.trace.json.gz", small)
    return root


_RECORD = r"""
import json, sys, torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
sys.path.insert(0, sys.argv[2])
from tests.cpu_models import model
for mode in sys.argv[3:]:
    torch.manual_seed(0)
    m, x = model(mode), torch.randn(2, 32, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(f"{sys.argv[1]}/cpu_{mode}", worker_name="trainer0",
                                                          use_gzip=True)) as p:
        for _ in range(4):
            # Run metadata in the collector's format (format/tags.py); /runs shows it.
            p.add_metadata_json("tb_attn", json.dumps({"format": 1, "variant": mode, "seq_len": 32}))
            m(x).sum().backward()
            p.step()
# And one run through the project's own collector, which also writes TensorBoard scalars beside it.
import tb_attn_plugin
torch.manual_seed(0)
m, x = model("sdpa"), torch.randn(2, 32, 64)
with tb_attn_plugin.profile(f"{sys.argv[1]}/collector_sdpa", model=m, variant="collector-sdpa",
                            schedule=schedule(wait=0, warmup=1, active=1, repeat=1)) as p:
    for _ in range(3):
        m(x).sum().backward()
        p.step()
"""


@pytest.fixture(scope="session")
def handler_runs(tmp_path_factory) -> dict[str, Path]:
    """Runs written by torch.profiler.tensorboard_trace_handler itself (two spans each) and one by
    tb_attn_plugin.profile (the collector), recorded in a subprocess so the test process never
    imports torch."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")

    root = tmp_path_factory.mktemp("handler_runs")
    modes = ("sdpa", "eager")
    subprocess.run([sys.executable, "-c", _RECORD, str(root), str(REPO), *modes], check=True, timeout=300,
                   capture_output=True)
    out = {}
    for name in [f"cpu_{m}" for m in modes] + ["collector_sdpa"]:
        out[name] = d = root / name
        for f in d.iterdir():
            os.utime(f, (OLD, OLD))
    return out


def make_tb_app(logdir, cache_dir, *, loaders=None, reload_interval: float = 1.0, env=None, logdir_spec=None):
    """The real TensorBoard WSGI application, built as ``tensorboard --logdir`` builds it (or
    ``--logdir_spec`` when given, with logdir None), with the Attention plugin. Returns (werkzeug
    test client, {plugin name: plugin})."""
    import copy

    from tensorboard import program
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_ingester
    from tensorboard.plugins.core import core_plugin
    from werkzeug.test import Client

    from tb_attn_plugin.plugin.loader import AttentionPluginLoader

    # The core plugin defines --logdir and the other flags, and serves /data/plugins_listing.
    loaders = loaders or [core_plugin.CorePluginLoader(), AttentionPluginLoader]
    tb = program.TensorBoard(plugins=loaders)
    where = {"logdir_spec": logdir_spec} if logdir_spec else {"logdir": str(logdir)}
    tb.configure(**where, reload_interval=reload_interval, load_fast="false")
    ingest_flags = tb.flags
    if "://" in str(logdir):  # TensorBoard's own event reader has no S3 endpoint here; it has no events to read
        ingest_flags = copy.copy(tb.flags)
        ingest_flags.logdir = str(Path(cache_dir) / "no-events")
        Path(ingest_flags.logdir).mkdir(parents=True, exist_ok=True)
    ingester = data_ingester.LocalDataIngester(ingest_flags)
    ingester.start()
    saved = dict(os.environ)
    os.environ.update({"TB_ATTN_CACHE_DIR": str(cache_dir), "TB_ATTN_SETTLE_S": "1", **(env or {})})
    try:
        app = application.TensorBoardWSGIApp(tb.flags, loaders, ingester.data_provider, None,
                                             ingester.deprecated_multiplexer)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Client(app), {p.plugin_name: p for p in app._plugins}


def wait_for(pred, timeout: float = 60.0, what: str = "condition not reached", interval: float = 0.01) -> None:
    """Poll ``pred()`` every ``interval`` seconds until it holds; fail with ``what`` after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(interval)


def wait_runs(client, pred, timeout: float = 120.0):
    """Poll /runs until pred(doc) holds; return the document."""
    import json
    import time

    deadline = time.monotonic() + timeout
    while True:
        doc = json.loads(client.get("/data/plugin/tb_attn/runs").data)
        if pred(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"/runs did not reach the expected state in {timeout} s: {doc}")
        time.sleep(0.2)


def all_settled(doc, runs=None) -> bool:
    want = [r for r in doc["runs"] if runs is None or r["run"] in runs]
    if runs is not None and len(want) < len(runs):
        return False
    return bool(want) and all(s["status"] != "loading" for r in want for w in r["workers"] for s in w["spans"])


@pytest.fixture
def tb_app(tmp_path):
    """Factory for make_tb_app whose plugins are closed (scanner and worker processes stopped) after the test."""
    made = []

    def make(logdir, **kw):
        kw.setdefault("cache_dir", tmp_path / "cache")
        client, plugins = make_tb_app(logdir, kw.pop("cache_dir"), **kw)
        made.append(plugins)
        return client, plugins

    yield make
    for plugins in made:
        p = plugins.get("tb_attn")
        if p is not None:
            p.close()
