"""The safety net and the annotated-trace link in the Attention tab, in a real browser: a real
``tensorboard --logdir`` over a built trace whose only attention kernel has a name nobody knows,
driven by frontend/browser/kernels.mjs (playwright-core, Debian's chromium). Needs what
tests/test_browser.py needs; TB_ATTN_UPDATE_SCREENSHOTS=1 writes docs/screenshots/unknown_kernels.png."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.kernel_traces import MLP, TraceBuilder
from tests.test_browser import CHROMIUM, FRONTEND, ROOT, SPAN, _missing
from tests.test_plugin_tensorboard import poll, tensorboard_process

RUN = "custom_kernels"


def test_unknown_kernels_and_annotated_download(tmp_path):
    why = _missing()
    if why:
        if os.environ.get("TB_ATTN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser test cannot run: {why}")
        pytest.skip(why)
    logdir = tmp_path / "logdir"
    (logdir / RUN).mkdir(parents=True)
    b = TraceBuilder()
    paged = "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128>(float*)"
    reduce = "void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*)"
    b.graph_replay([[(paged, 40.0), (reduce, 4.0), ("void zz_custom_attn_fwd_kernel<128, true>(Params)", 30.0)]
                    for _ in range(4)], between=MLP)
    path = b.write(logdir / RUN / f"worker0.{SPAN}.pt.trace.json.gz")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    shots = ROOT / "docs" / "screenshots" if os.environ.get("TB_ATTN_UPDATE_SCREENSHOTS") == "1" else tmp_path / "shots"
    with tensorboard_process(logdir, tmp_path, settle_s="0", reload_s="2") as (base, proc):
        poll(f"{base}/data/plugins_listing", lambda d: "tb_attn" in d and d["tb_attn"].get("enabled"), proc=proc)
        env = dict(os.environ, TB_URL=base, RUN=RUN, SHOTS_DIR=str(shots), CHROMIUM=CHROMIUM)
        p = subprocess.run(["node", "browser/kernels.mjs"], cwd=FRONTEND, env=env, capture_output=True, text=True,
                           timeout=600)
    print(p.stdout[-8000:])
    print(p.stderr[-4000:], file=sys.stderr)
    assert p.returncode == 0, f"browser checks failed:\n{p.stderr[-4000:]}"
    assert "checks passed" in p.stdout
    assert sorted(x.name for x in (logdir / RUN).iterdir()) == [path.name]  # the download wrote nothing here
