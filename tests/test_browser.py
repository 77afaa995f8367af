"""The Attention tab in a real browser: a real ``tensorboard --logdir`` over the six shared GPU
traces (or, in a clone without ../shared, the CPU traces the suite records: tests/recorded.py), the
demo's CPU runs at several sequence lengths (python -m demo), a crafted trace whose kernel (or op) is named
``<img src=x onerror=alert(1)>``, a run named like markup and a broken trace; Debian's chromium,
driven by playwright-core (frontend/browser/e2e.mjs), reads every view and compares what it shows
with the backend's JSON from the same server, and fails on any console error.

Needs node, ``npm ci`` in frontend/ and /usr/bin/chromium; scripts/test.sh installs them and sets
TB_ATTN_REQUIRE_BROWSER=1, so in CI a missing piece fails instead of skipping. With
TB_ATTN_UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (the README shows them).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import ROOT, require_browser, run_script, serving, shots_dir
from tests.conftest import SHARED_TRACES, recorded_trace

SPAN = "1700000000000000000"
XSS_KERNEL = "<img src=x onerror=alert(1)>"
XSS_RUN = "xss <img src=x onerror=alert(2)>"
SCALING_LENGTHS = (64, 256, 1024)  # without the demo: tests/cpu_models.py at these lengths
DEMO_VARIANTS = ("eager", "sdpa", "sdpa-math")
DEMO_LENGTHS = (128, 512, 1024)

SHARED = {
    "h100_owlv2_eager": "tl_h100_owlv2_eager_bmm_softmax",
    "h100_bert_flash": "tl_h100_bert_small_sdpa_flash",
    "mi300x_bert_aotriton": "tl_mi300x_bert_small_sdpa_aotriton",
    "mi300x_compile": "tl_mi300x_torch_compile_small",
    "mi300x_flux_aiter": "tl_mi300x_xdit_flux1_aiter_fmha_hipgraph",
    "a100_no_attention": "hta_a100_negative_log_softmax_fwdbwd",
}


def _put(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)
    os.utime(dst, (1_600_000_000, 1_600_000_000))  # long settled: analysed at once


def _xss_trace(src: Path, needle: str) -> bytes:
    """A real trace with its events named like ``needle`` (the flash kernel of the H100 BERT trace,
    or an op inside each call of a recorded CPU trace) renamed to markup."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    n = 0
    for e in doc["traceEvents"]:
        if isinstance(e.get("name"), str) and needle in e["name"]:
            e["name"] = XSS_KERNEL
            n += 1
    assert n, f"{src.name} has no {needle} to rename"
    return gzip.compress(json.dumps(doc).encode(), mtime=0)


def _demo_runs(logdir: Path) -> list[str]:
    """The demo (python -m demo): eager, SDPA and SDPA-math training steps at three lengths, tagged
    by the collector with variant and seq_len."""
    if not (ROOT / "demo" / "__main__.py").is_file():
        return []
    out = logdir / "demo"
    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(out), "--variants", *DEMO_VARIANTS,
                           "--lengths", *map(str, DEMO_LENGTHS), "--steps", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"python -m demo failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    for f in out.rglob("*"):
        if f.is_file():
            os.utime(f, (1_600_000_000, 1_600_000_000))
    return sorted(f"demo/{d.name}" for d in out.iterdir() if d.is_dir())


def _scaling_runs(logdir: Path) -> list[str]:
    """Eager and SDPA training steps on the CPU at several sequence lengths (plain torch.profiler)."""
    demo = _demo_runs(logdir)
    if demo:
        return demo
    try:
        import tests.cpu_models as cm
    except ImportError:
        return []
    runs = []
    out = logdir.parent / "cpu_traces"
    out.mkdir(exist_ok=True)
    saved = cm.L
    try:
        for mode in ("eager", "sdpa"):
            for n in SCALING_LENGTHS:
                cm.L = n
                path = cm.record(mode, out)
                run = f"cpu_{mode}_L{n}"
                _put(logdir / run / f"worker0.{SPAN}.pt.trace.json", path.read_bytes())
                path.unlink()
                runs.append(run)
    finally:
        cm.L = saved
    return runs


# Without ../shared: the same roles played by the suite's own CPU recordings (tests/recorded.py).
RECORDED = {"cpu_eager": "eager", "cpu_sdpa": "sdpa", "cpu_math": "math", "cpu_no_attention": "negative"}


@pytest.fixture(scope="module")
def browser_logdir(tmp_path_factory) -> tuple[Path, dict]:
    logdir = tmp_path_factory.mktemp("browser") / "logdir"
    gpu = all((SHARED_TRACES / f"{n}.json.gz").exists() for n in SHARED.values())
    picked = {run: SHARED_TRACES / f"{name}.json.gz" for run, name in SHARED.items()} if gpu else \
        {run: recorded_trace(role) for run, role in RECORDED.items()}
    for run, src in picked.items():
        _put(logdir / run / f"worker0.{SPAN}.pt.trace.json.gz", src.read_bytes())
    if gpu:
        shutil.copy(SHARED_TRACES / "README.md", logdir / "SHARED_TRACES_README.md")
        xss = _xss_trace(SHARED_TRACES / "tl_h100_bert_small_sdpa_flash.json.gz", "flash_fwd_kernel")
        whole = (SHARED_TRACES / "tl_mi300x_bert_small_sdpa_aotriton.json.gz").read_bytes()
    else:
        xss = _xss_trace(recorded_trace("sdpa"), "aten::transpose")
        whole = recorded_trace("math").read_bytes()
    _put(logdir / XSS_RUN / f"worker0.{SPAN}.pt.trace.json.gz", xss)
    _put(logdir / "broken_truncated" / f"worker0.{SPAN}.pt.trace.json.gz", whole[: len(whole) // 2])
    scaling = _scaling_runs(logdir)
    runs = {"eager": "h100_owlv2_eager" if gpu else "cpu_eager", "flash": "h100_bert_flash" if gpu else "cpu_sdpa",
            "xss": XSS_RUN, "negative": "a100_no_attention" if gpu else "cpu_no_attention", "bad": "broken_truncated",
            "scaling": scaling}
    return logdir, runs


@pytest.fixture(scope="module")
def tensorboard_url(browser_logdir, tmp_path_factory):
    logdir, _ = browser_logdir
    tmp = tmp_path_factory.mktemp("tb")
    with serving(logdir, tmp) as (base, _):
        yield base


def test_attention_tab_in_a_real_browser(browser_logdir, tensorboard_url, tmp_path):
    require_browser()
    _, runs = browser_logdir
    shots = shots_dir(tmp_path)
    run_script("e2e.mjs", tensorboard_url, shots, timeout=900, RUNS_JSON=json.dumps(runs))
    for name in ("summary", "stages", "kernels", "compare", "scaling", "timeline"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, f"screenshot {name}.png is missing or blank"
