"""A real CPU sweep for the plugin and browser tests: math, flash and eager timed on a small grid,
efficient unsupported on the CPU, math and eager out of memory under a 48 MiB cap at long lengths,
and one tb-attn profile per backend at L=256."""

from __future__ import annotations

from pathlib import Path

SWEEP_LENGTHS = "64:2048:x2"


def record_sweep(logdir: Path, hparams_logdir: Path | None = None) -> list[dict]:
    import tb_attn_plugin

    return list(tb_attn_plugin.sweep(str(logdir), backends="math,flash,eager,efficient", seq_len=SWEEP_LENGTHS,
                                     batch="1,4", heads=2, head_dim=16, dtype="float32", device="cpu",
                                     min_run_time=0.02, warmup=1, threads=1, memory_cap="48M", profile="256",
                                     hparams_logdir=str(hparams_logdir) if hparams_logdir else None,
                                     progress=False, out=False))
