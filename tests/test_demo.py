"""The demo writes one run per variant and length, each with a trace and attention scalars."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_demo_writes_runs_and_prints_the_tensorboard_command(tmp_path, capsys):
    from demo.__main__ import STEPS, main
    from tb_attn_plugin.report.build import analyze_file
    from tb_attn_plugin.trace.discover import find_traces

    assert main(["--logdir", str(tmp_path), "--variants", "eager", "sdpa-math", "--lengths", "32", "64"]) == 0
    out = capsys.readouterr().out
    assert f"tensorboard --logdir {tmp_path}" in out
    runs = {t.run: t for t in find_traces(str(tmp_path))}
    assert sorted(runs) == ["eager-L32", "eager-L64", "sdpa-math-L32", "sdpa-math-L64"]
    for name, t in runs.items():
        report = analyze_file(t.path)
        # two layers, STEPS profiled steps by default: the per-step spread compare and Scaling read
        assert STEPS >= 3 and report["calls"] == 2 * STEPS and len(report["steps"]) == STEPS
        assert report["metadata"]["variant"] == name.rsplit("-L", 1)[0]
        assert report["metadata"]["seq_len"] == int(name.rsplit("-L", 1)[1])
        assert {lay.shape.q_len for lay in report["layers"]} == {int(name.rsplit("-L", 1)[1])}
        assert list((tmp_path / name).glob("events.out.tfevents.*"))
    impls = {lay.implementation for lay in analyze_file(runs["sdpa-math-L32"].path)["layers"]}
    assert impls == {"math"}


def test_demo_refuses_bad_arguments(capsys):
    from demo.__main__ import main

    with pytest.raises(SystemExit):
        main(["--lengths", "1"])
    assert "at least 2" in capsys.readouterr().err


def test_pinned_sdpa_backend_variant_and_gpu_only_variants_refused_on_the_cpu(tmp_path, capsys):
    from demo.__main__ import main
    from tb_attn_plugin.report.build import analyze_file
    from tb_attn_plugin.trace.discover import find_traces

    assert main(["--logdir", str(tmp_path), "--variants", "sdpa-flash", "--lengths", "32", "--steps", "1"]) == 0
    (t,) = find_traces(str(tmp_path))
    report = analyze_file(t.path)
    assert report["calls"] == 2
    assert {(lay.implementation, lay.backend, lay.source) for lay in report["layers"]} == {
        ("cpu_fused", "flash_cpu", "tag")}
    for variant in ("sdpa-efficient", "sdpa-cudnn", "flex"):
        with pytest.raises(SystemExit):
            main(["--variants", variant, "--lengths", "32"])
        assert "need --device cuda" in capsys.readouterr().err


def test_demo_output_has_no_usdt_lines_but_keeps_other_stderr(tmp_path):
    """kineto prints 'USDT: ... profiler_start' at every start and stop; the demo's output must not."""
    import subprocess
    import sys

    from tests.conftest import REPO

    proc = subprocess.run([sys.executable, "-m", "demo", "--logdir", str(tmp_path), "--variants", "sdpa", "--lengths", "32", "--steps", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "USDT" not in proc.stderr and "USDT" not in proc.stdout
    assert "sdpa-L32" in proc.stdout
    # The filter passes everything else: a line written to fd 2 by C code inside it still shows.
    code = ("import os; from demo.quiet import without_usdt_lines\n"
            "with without_usdt_lines():\n"
            "    os.write(2, b'USDT:2026 x profiler_start\\n'); os.write(2, b'a real error\\n')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.stderr == "a real error\n"
