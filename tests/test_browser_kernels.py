"""The safety net and the annotated-trace link in the Attention tab, in a real browser: a real
``tensorboard --logdir`` over a built trace whose only attention kernel has a name nobody knows,
driven by frontend/browser/kernels.mjs (playwright-core, Debian's chromium). Needs what
tests/test_browser.py needs; TB_ATTN_UPDATE_SCREENSHOTS=1 writes docs/screenshots/unknown_kernels.png."""

from __future__ import annotations

import os

from tests.kernel_traces import MLP, TraceBuilder
from tests.browser import require_browser, run_script, serving, shots_dir
from tests.test_browser import SPAN

RUN = "custom_kernels"


def test_unknown_kernels_and_annotated_download(tmp_path):
    require_browser()
    logdir = tmp_path / "logdir"
    (logdir / RUN).mkdir(parents=True)
    b = TraceBuilder()
    paged = "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128>(float*)"
    reduce = "void vllm::paged_attention_v2_reduce_kernel<__nv_bfloat16, 128, 128, 512>(__nv_bfloat16*)"
    b.graph_replay([[(paged, 40.0), (reduce, 4.0), ("void zz_custom_attn_fwd_kernel<128, true>(Params)", 30.0)]
                    for _ in range(4)], between=MLP)
    path = b.write(logdir / RUN / f"worker0.{SPAN}.pt.trace.json.gz")
    os.utime(path, (1_600_000_000, 1_600_000_000))
    shots = shots_dir(tmp_path)
    with serving(logdir, tmp_path) as (base, _):
        run_script("kernels.mjs", base, shots, RUN=RUN)
    assert sorted(x.name for x in (logdir / RUN).iterdir()) == [path.name]  # the download wrote nothing here
