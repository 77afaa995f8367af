"""``tb-attn sweep`` on the CPU: real torch.utils.benchmark timings of math, flash (the CPU flash
kernel) and eager on a small grid, an unsupported backend, a real out-of-memory under a memory cap,
resuming, Ctrl-C, --profile analysed by the engine, HParams read back with TensorBoard's reader."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tb_attn_plugin.cli import main  # noqa: E402
from tb_attn_plugin.sweeps import analysis, store  # noqa: E402
from tb_attn_plugin.sweeps.flops import attention_flops  # noqa: E402
from tb_attn_plugin.sweeps.grid import GridError, parse_bytes, parse_ints  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FAST = dict(heads=2, head_dim=16, dtype="float32", device="cpu", min_run_time=0.02, warmup=1, threads=1,
            progress=False)  # one thread: timings stay sane on a loaded 2-core CI machine
REQUIRED = ("backend", "batch", "seq_len", "heads", "head_dim", "dtype", "causal", "pass", "status", "median_s",
            "iqr_s", "peak_bytes", "tflops", "max_abs_error")


def sweep(logdir, **kw):
    import tb_attn_plugin

    return tb_attn_plugin.sweep(str(logdir), **{**FAST, **kw})


def hparams_dir(logdir):
    return logdir.parent / (logdir.name + "-hparams")


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("sweep")
    res = sweep(logdir, backends="math,flash,eager,efficient", seq_len="128,1024", batch="1,2",
                hparams_logdir=str(hparams_dir(logdir)))
    return logdir, res


def test_flop_formula_by_hand():
    # B=2, H=3, Lq=5, Lk=7, D=11: two matmuls of 2*Lq*Lk*D per head
    assert attention_flops(2, 3, 5, 7, 11) == 2 * 3 * (2 * 5 * 7 * 11) * 2 == 9240
    assert attention_flops(2, 3, 5, 7, 11, causal=True) == 4620
    assert attention_flops(2, 3, 5, 7, 11, pass_="fwd+bwd") == 3.5 * 9240
    assert attention_flops(2, 3, 5, 7, 11, pass_="bwd") == 2.5 * 9240


def test_grid_ranges_and_sizes():
    assert parse_ints("128:8192:x2", "seq-len") == [128, 256, 512, 1024, 2048, 4096, 8192]
    assert parse_ints("1,4:12:+4,2", "batch") == [1, 2, 4, 8, 12]
    assert parse_ints("64:200:64", "seq-len") == [64, 128, 192]
    for bad in ("", "12:abc", "1024:128:x2", "1:100:x1", "0,4", "1.5"):
        with pytest.raises(GridError):
            parse_ints(bad, "seq-len")
    assert parse_bytes("512M") == 512 * 2**20 and parse_bytes("2GiB") == 2 * 2**30 and parse_bytes("1000") == 1000
    with pytest.raises(GridError):
        parse_bytes("12Q")


def test_every_cell_recorded_with_its_numbers(small_sweep):
    logdir, res = small_sweep
    recs, bad = store.read(str(logdir))
    assert bad == 0 and len(recs) == 4 * 2 * 2 == len(res)
    for r in recs:
        for k in REQUIRED:
            assert k in r, k
    from tb_attn_plugin.collector.peaks import cpu_model

    # what the cells ran on, measured or not: a sweep is about one machine
    assert {(r["device_name"], r["torch_version"]) for r in recs} == {(cpu_model(), torch.__version__)}
    ok = [r for r in recs if r["status"] == "ok"]
    assert {r["backend"] for r in ok} == {"math", "flash", "eager"} and len(ok) == 12
    for r in ok:
        assert r["median_s"] > 0 and r["iqr_s"] >= 0 and r["peak_bytes"] > 0 and len(r["times_s"]) >= 1
        assert r["flops"] == attention_flops(r["batch"], 2, r["seq_len"], r["seq_len"], 16)
        assert math.isclose(r["tflops"], r["flops"] / r["median_s"] / 1e12)
        assert math.isclose(r["tokens_per_s"], r["batch"] * r["seq_len"] / r["median_s"])
        assert r["pct_of_peak"] is None  # no peak is known for a CPU
        # every backend agrees with math on the same inputs (float32)
        assert r["max_abs_error"] is not None and r["max_abs_error"] < 1e-4
    math_err = [r["max_abs_error"] for r in ok if r["backend"] == "math"]
    assert math_err == [0.0] * 4


def test_math_time_and_memory_grow_with_length(small_sweep):
    _, res = small_sweep
    m = {(r["batch"], r["seq_len"]): r for r in res if r["backend"] == "math"}
    for b in (1, 2):
        # 64x the FLOPs and score-matrix bytes from L=128 to L=1024
        assert m[(b, 1024)]["median_s"] > 4 * m[(b, 128)]["median_s"]
        assert m[(b, 1024)]["peak_bytes"] > 16 * m[(b, 128)]["peak_bytes"]
    fit = {(f["backend"], f["batch"]): f for f in analysis.fits(list(res))}
    assert fit[("math", 1)]["memory_exponent"] > 1.6  # the score matrix: ~ L^2


def test_unsupported_backend_recorded_and_sweep_goes_on(small_sweep):
    _, res = small_sweep
    eff = [r for r in res if r["backend"] == "efficient"]
    assert len(eff) == 4 and all(r["status"] == "unsupported" for r in eff)
    assert all("backend" in r["reason"] and r["median_s"] is None for r in eff)
    # the reason says why, then sdpa_kernel's own RuntimeError
    assert all(r["reason"].startswith("efficient has no CPU kernel in torch ") and "; sdpa_kernel: " in r["reason"]
               for r in eff)


def test_refusal_reason_keeps_the_reasons_sdpa_only_warns():
    # A real refusal: the CPU flash kernel takes no dropout; torch says so in a warning, and the
    # RuntimeError itself only says "No available kernel".
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tb_attn_plugin.sweeps import refusal

    q = torch.randn(1, 2, 16, 8)
    with refusal.capture() as caught:
        with pytest.raises(RuntimeError) as exc, sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    text = refusal.reason("flash", "cpu", exc.value, caught)
    assert "do not support non-zero dropout" in text and "Triggered internally" not in text
    assert "kernel not used because" not in text and "no CPU kernel" not in text
    assert text.endswith("sdpa_kernel: " + str(exc.value).strip().splitlines()[0])


def test_hparams_and_scalars_agree_with_sweep_jsonl(small_sweep):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    logdir, res = small_sweep
    by_id = {r["cell_id"]: r for r in res}
    # One session per cell, in the HParams logdir under the sweep's name; none in the sweep's logdir, which
    # holds one TensorBoard run (its scalars): a user's logdir gains one run per sweep.
    where = hparams_dir(logdir) / logdir.name
    sessions = sorted(p.name for p in where.iterdir() if p.is_dir())
    assert sessions == sorted(by_id)
    runs = {str(Path(d).relative_to(logdir)) for d, _, files in os.walk(logdir) if any(".tfevents." in f for f in files)}
    assert runs == {"."}
    for cell_id in sessions:
        acc = EventAccumulator(str(where / cell_id))
        acc.Reload()
        info = metadata.parse_session_start_info_plugin_data(
            acc.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content)
        rec = by_id[cell_id]
        assert info.group_name == cell_id
        assert info.hparams["backend"].string_value == rec["backend"]
        assert info.hparams["seq_len"].number_value == rec["seq_len"]
        assert info.hparams["batch"].number_value == rec["batch"]
        assert info.hparams["status"].string_value == rec["status"]
        tags = acc.Tags()["scalars"]
        if rec["status"] == "ok":
            assert math.isclose(acc.Scalars("sweep/median_ms")[0].value, rec["median_s"] * 1e3, rel_tol=1e-6)
            assert math.isclose(acc.Scalars("sweep/peak_mib")[0].value, rec["peak_bytes"] / 2**20, rel_tol=1e-6)
        else:
            assert "sweep/median_ms" not in tags
    # No experiment config: TensorBoard infers the domains from every sweep's sessions (one written by the
    # first sweep would hide a second sweep's values from the filters; tests/test_browser_sweep.py checks it).
    assert not [f for f in os.listdir(hparams_dir(logdir)) if ".tfevents." in f]
    # Time against sequence length per backend: step = seq_len
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    pts = {(e.step, e.value) for e in acc.Scalars("sweep/time_ms/math/batch1")}
    want = {(r["seq_len"], r["median_s"] * 1e3) for r in res if r["backend"] == "math" and r["batch"] == 1}
    assert {s for s, _ in pts} == {s for s, _ in want}
    for s, v in pts:
        assert math.isclose(v, dict(want)[s], rel_tol=1e-6)


def test_rerun_skips_finished_cells(tmp_path):
    first = sweep(tmp_path, backends="math,eager", seq_len="64", batch="1")
    assert first.measured == 2 and first.skipped == 0
    again = sweep(tmp_path, backends="math,eager", seq_len="64", batch="1")
    assert again.measured == 0 and again.skipped == 2
    assert [r["wall_time"] for r in again] == [r["wall_time"] for r in first]
    grown = sweep(tmp_path, backends="math,eager", seq_len="64,128", batch="1")
    assert grown.measured == 2 and grown.skipped == 2
    lines = (tmp_path / "sweep.jsonl").read_text().splitlines()
    assert len(lines) == 4 and len({json.loads(x)["cell_id"] for x in lines}) == 4


def test_rerun_on_another_machine_says_so(tmp_path, capsys):
    sweep(tmp_path, backends="math", seq_len="64", batch="1")
    again = sweep(tmp_path, backends="math", seq_len="64", batch="1")
    assert again.skipped == 1 and "warning" not in capsys.readouterr().err  # the same machine: nothing to say
    # the same file as if it came from a GPU box: its cells stand, and the rerun says whose they are
    p = tmp_path / "sweep.jsonl"
    (rec,) = [json.loads(x) for x in p.read_text().splitlines()]
    p.write_text(json.dumps({**rec, "device_name": "NVIDIA H100 80GB HBM3", "torch_version": "2.5.1"}) + "\n")
    again = sweep(tmp_path, backends="math", seq_len="64", batch="1")
    err = capsys.readouterr().err
    assert again.measured == 0 and again.skipped == 1
    assert "holds cells measured on NVIDIA H100 80GB HBM3 with torch 2.5.1" in err and torch.__version__ in err


def test_memory_cap_forces_a_real_oom_and_the_sweep_goes_on(tmp_path):
    # B=1, H=2, L=2048 float32: math's score matrix alone is 32 MiB, twice that with softmax's output;
    # flash never materialises it. The cap is an address-space limit in a child process.
    res = sweep(tmp_path, backends="math,flash", seq_len="64,2048", batch="1", memory_cap="40M")
    st = {(r["backend"], r["seq_len"]): r for r in res}
    assert st[("math", 64)]["status"] == "ok" and st[("flash", 64)]["status"] == "ok"
    assert st[("math", 2048)]["status"] == "oom"
    assert "can't allocate memory" in st[("math", 2048)]["reason"]
    assert st[("flash", 2048)]["status"] == "ok"  # measured after the OOM, in the same child
    assert st[("math", 2048)]["memory_cap_bytes"] == 40 * 2**20
    assert analysis.oom_boundary(list(res)) == [{"backend": "math", "batch": 1, "max_ok_seq_len": 64,
                                                 "min_oom_seq_len": 2048}]


def test_no_profiler_log_lines_reach_the_terminal(tmp_path, capfd):
    # kineto writes "USDT: ... profiler_start/stop" to fd 2 at every profiler start and stop: in the
    # peak-memory call, in --profile and in the capped child's warm-up; none may break the output.
    sweep(tmp_path / "a", backends="math", seq_len="64", batch="1", memory_cap="4G")
    sweep(tmp_path / "b", backends="math", seq_len="64", batch="1", profile="64")
    out = capfd.readouterr()
    assert "USDT" not in out.err and "USDT" not in out.out


def test_profile_writes_a_trace_the_engine_analyses(tmp_path):
    from tb_attn_plugin.report.build import analyze_path

    res = sweep(tmp_path, backends="math,eager", seq_len="64,128", batch="1", profile="128")
    prof = {r["backend"]: r["profile_run"] for r in res if r["seq_len"] == 128}
    assert all(r["profile_run"] is None for r in res if r["seq_len"] == 64)
    for backend, run in prof.items():
        assert run == f"profiles/{[r for r in res if r['seq_len'] == 128 and r['backend'] == backend][0]['cell_id']}"
        items = list(analyze_path(str(tmp_path / run)))
        assert len(items) == 1
        report = items[0][1]
        assert report["calls"] >= 1, report.get("warnings")
        assert report["metadata"]["variant"] == backend


def test_module_factory_and_fwd_bwd(tmp_path):
    res = sweep(tmp_path, backends="flash", module="tests.sweep_module_example:mha", seq_len="64", batch="1",
                pass_="fwd+bwd")
    by = {r["backend"]: r for r in res}
    assert by["module"]["status"] == "ok" and by["module"]["module"] == "tests.sweep_module_example:mha"
    assert by["flash"]["status"] == "ok" and by["flash"]["pass"] == "fwd+bwd"
    assert by["flash"]["flops"] == 3.5 * attention_flops(1, 2, 64, 64, 16)


@pytest.mark.parametrize("argv, needle", [
    (["--seq-len", "12:abc"], "--seq-len"),
    (["--backends", "math,nope"], "unknown backend 'nope'"),
    (["--heads", "4", "--kv-heads", "3"], "--kv-heads 3 must divide"),
    (["--dtype", "float8"], "--dtype"),
    (["--device", "tpu"], "--device"),
    (["--device", "cuda"], "no CUDA"),
    (["--module", "tests.no_such_module:f"], "cannot import tests.no_such_module"),
    (["--module", "tests.sweep_module_example:not_a_factory"], "no callable 'not_a_factory'"),
    (["--memory-cap", "12Q"], "--memory-cap"),
    (["--min-run-time", "0"], "--min-run-time"),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys, argv, needle):
    if needle == "no CUDA" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code = main(["sweep", "--logdir", str(tmp_path / "s"), "-q", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("tb-attn: error: sweep: ") and needle in err[0], err
    assert not (tmp_path / "s" / "sweep.jsonl").exists()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_finished_cells_and_rerun_measures_the_rest(tmp_path):
    logdir = tmp_path / "s"
    cmd = [sys.executable, "-m", "tb_attn_plugin.cli", "sweep", "--logdir", str(logdir), "--device", "cpu",
           "--backends", "math,eager", "--seq-len", "64:8192:x2", "--batch", "1", "--heads", "2", "--head-dim", "16",
           "--dtype", "float32", "--threads", "1", "--min-run-time", "0.3", "--warmup", "1", "--no-summaries"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # A shell that starts the suite in the background (``cmd &`` without job control) hands it SIGINT
    # ignored, and an ignored signal stays ignored across exec: the child gets Ctrl-C's default back.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    jsonl = logdir / "sweep.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if jsonl.exists() and len(jsonl.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept, bad = store.read(str(logdir))
    # 16 cells, the last ones seconds each: the grid cannot finish between two looks at the file.
    assert bad == 0 and 2 <= len(kept) < 16
    assert "interrupted" in out and "run the same command again" in out
    assert "Traceback" not in err
    again = subprocess.run(cmd + ["--seq-len", "64:128:x2"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{min(len(kept), 4)} already in" in again.stderr


def test_causal_grouped_query_attention_agrees_with_math(tmp_path):
    res = sweep(tmp_path, backends="math,flash,eager", seq_len="96", batch="2", heads=4, kv_heads=2, causal=True)
    assert [r["status"] for r in res] == ["ok"] * 3
    for r in res:
        assert r["kv_heads"] == 2 and r["causal"] is True
        assert r["flops"] == attention_flops(2, 4, 96, 96, 16) / 2
        assert r["max_abs_error"] < 1e-4, r


def _rec(backend, batch, L, median, status="ok", peak=None, samples=3):
    return {"backend": backend, "batch": batch, "seq_len": L, "status": status, "median_s": median, "peak_bytes": peak,
            "times_s": [median] * samples if status == "ok" else []}


def test_analysis_fits_crossovers_best_and_oom_boundary_by_hand():
    # a: 1e-6 * L^2; b: 1e-4 * L (they cross at L = 100); c runs out of memory from L = 400
    recs = [_rec("a", 1, L, 1e-6 * L * L, peak=8 * L * L) for L in (25, 50, 200, 400)]
    recs += [_rec("b", 1, L, 1e-4 * L, peak=64 * L) for L in (25, 50, 200, 400)]
    recs += [_rec("c", 1, 25, 1e-3), _rec("c", 1, 50, 2e-3), _rec("c", 1, 200, None, "oom"),
             _rec("c", 1, 400, None, "oom"), _rec("d", 1, 25, None, "unsupported")]
    fits = {f["backend"]: f for f in analysis.fits(recs)}
    assert math.isclose(fits["a"]["time_exponent"], 2.0) and math.isclose(fits["a"]["memory_exponent"], 2.0)
    assert math.isclose(fits["b"]["time_exponent"], 1.0) and math.isclose(fits["b"]["memory_exponent"], 1.0)
    assert fits["d"]["time_exponent"] is None
    cross = [c for c in analysis.crossovers(recs) if c["backends"] == ["a", "b"]]
    assert len(cross) == 1 and cross[0]["between"] == [50, 200] and math.isclose(cross[0]["seq_len"], 100.0)
    assert cross[0]["faster_below"] == "a" and cross[0]["faster_above"] == "b"
    best = {b["seq_len"]: b for b in analysis.best(recs)}
    assert best[25]["backend"] == "a" and best[400]["backend"] == "b"
    assert math.isclose(best[400]["speedup"], (1e-6 * 400 * 400) / (1e-4 * 400))
    assert best[25]["statuses"]["d"] == "unsupported"
    assert analysis.oom_boundary(recs) == [{"backend": "c", "batch": 1, "max_ok_seq_len": 50, "min_oom_seq_len": 200}]
    text = analysis.render(recs)
    assert "a faster below L~100, b above" in text and "c B=1 fits up to L=50, fails from L=200" in text
    assert cross[0]["noise_unknown"] and "noise unknown" in text  # these cells have no IQR


def test_a_crossover_from_noisy_cells_is_marked():
    # a: 1e-6 * L^2, b: 1e-4 * L cross at L = 100, between the measured 50 and 200
    def cells(iqr_at_200):
        recs = [dict(_rec("a", 1, L, 1e-6 * L * L), iqr_s=0.02 * 1e-6 * L * L) for L in (50, 200)]
        recs += [dict(_rec("b", 1, L, 1e-4 * L), iqr_s=(iqr_at_200 if L == 200 else 0.02) * 1e-4 * L) for L in (50, 200)]
        return recs
    (quiet,) = analysis.crossovers(cells(0.05))
    assert quiet["noisy_fraction"] is None and not quiet["noise_unknown"]
    assert "rely on" not in analysis.render(cells(0.05))
    (noisy,) = analysis.crossovers(cells(0.4))
    assert math.isclose(noisy["noisy_fraction"], 0.4)
    line = next(ln for ln in analysis.render(cells(0.4)).splitlines() if "crossover" in ln)
    assert line.endswith("noisy: a cell's IQR is 40% of its median, not a crossover to rely on")


def test_an_exponent_fitted_to_noisy_cells_says_so():
    quiet = [dict(_rec("a", 1, L, 1e-6 * L * L), iqr_s=0.02 * 1e-6 * L * L) for L in (25, 50, 200)]
    noisy = [dict(_rec("b", 1, L, 1e-4 * L), iqr_s=(0.3 if L == 50 else 0.01) * 1e-4 * L) for L in (25, 50, 200)]
    fits = {f["backend"]: f for f in analysis.fits(quiet + noisy)}
    assert math.isclose(fits["a"]["max_iqr_fraction"], 0.02) and math.isclose(fits["b"]["max_iqr_fraction"], 0.3)
    lines = {ln.split()[0]: ln for ln in analysis.render(quiet + noisy).splitlines()[1:]}
    assert "noisy" not in lines["a"] and "noisy: a cell's IQR is 30% of its median" in lines["b"]


def test_a_cell_timed_once_is_shown_but_never_ranked_and_its_fit_says_noise_unknown():
    # b's cell at L=50 was timed once (an old sweep.jsonl, before every cell got three blocks): its IQR of 0
    # says nothing about noise, so b is not named best there, and b's exponent says its noise is unknown.
    recs = [_rec("a", 1, L, 1e-6 * L * L) for L in (25, 50, 200)]
    recs += [_rec("b", 1, L, 1e-5 * L, samples=1 if L == 50 else 3) for L in (25, 50, 200)]
    best = {b["seq_len"]: b for b in analysis.best(recs)}
    assert 1e-5 * 50 < 1e-6 * 50 * 50  # b is faster at 50, on its one sample
    assert best[50]["backend"] == "a" and best[50]["unranked"] == ["b"]
    fits = {f["backend"]: f for f in analysis.fits(recs)}
    assert fits["b"]["few_sample_cells"] == 1 and fits["a"]["few_sample_cells"] == 0
    lines = {ln.split()[0]: ln for ln in analysis.render(recs).splitlines()[1:] if not ln.startswith("  best")}
    assert "noise unknown: 1 cell(s) timed fewer than 3 times" in lines["b"] and "noise" not in lines["a"]


def test_best_from_a_noisy_cell_says_so():
    quiet = _rec("a", 1, 64, 2e-3)
    noisy = dict(_rec("b", 1, 64, 1e-3), iqr_s=16.05e-3)  # spread 1605% of its median, as seen on a loaded CPU
    (row,) = analysis.best([quiet, noisy])
    assert row["backend"] == "b" and math.isclose(row["noisy_fraction"], 16.05)
    assert "best B=1 L=64: b, but noisy (IQR 1605% of the median)" in analysis.render([quiet, noisy])


def test_a_cell_longer_than_min_run_time_still_gets_three_samples(tmp_path):
    # One call outlasts a 0.1 ms --min-run-time, so blocked_autorange alone keeps one block (IQR 0).
    sweep(tmp_path, backends="math", seq_len="512", batch="1", min_run_time=1e-4)
    (rec,), _ = store.read(str(tmp_path))
    assert rec["status"] == "ok" and len(rec["times_s"]) >= 3 and rec["iqr_s"] > 0


def test_percent_of_peak_only_for_16_bit_on_a_known_gpu():
    from tb_attn_plugin.roofline.devices import peak_tflops
    from tb_attn_plugin.sweeps.measure import peak_tflops_for

    assert peak_tflops_for("cpu", "bfloat16") is None
    assert peak_tflops_for("cuda", "float32", "NVIDIA H100 80GB HBM3") is None
    assert peak_tflops_for("cuda", "bfloat16", "NVIDIA H100 80GB HBM3") == peak_tflops("NVIDIA H100 80GB HBM3")
    assert peak_tflops_for("cuda", "bfloat16", "NVIDIA H100 80GB HBM3") is not None


def test_a_hugging_face_attention_layer_as_module(tmp_path):
    pytest.importorskip("transformers")
    res = sweep(tmp_path, backends=None, module="tests.sweep_module_example:llama", seq_len="64", batch="1",
                heads=4, kv_heads=2, causal=True, pass_="fwd+bwd")
    (r,) = res
    assert r["status"] == "ok", r["reason"]
    assert r["module"] == "tests.sweep_module_example:llama" and r["median_s"] > 0 and r["peak_bytes"] > 0
    assert r["max_abs_error"] is None  # a module has no math reference


def test_flex_is_compiled_flex_attention_and_agrees_with_math(tmp_path):
    # torch.compile of FlexAttention runs on the CPU too (inductor and a C++ compiler): one cell, causal
    res = sweep(tmp_path, backends="flex", seq_len="128", batch="1", causal=True)
    (r,) = res
    if r["status"] == "unsupported":
        pytest.skip(f"FlexAttention cannot be compiled here: {r['reason']}")
    assert r["status"] == "ok", r["reason"]
    assert r["max_abs_error"] < 1e-4 and r["median_s"] > 0


@pytest.mark.parametrize("argv", [["--heads", "many"], ["--min-run-time", "soon"], []])
def test_argparse_mistakes_are_one_line_too(tmp_path, capsys, argv):
    full = ["sweep", "-q", *argv] + ([] if not argv else ["--logdir", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        main(full)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("tb-attn: error: sweep: "), err


def test_printed_numbers_table_has_every_measured_cell(small_sweep, tmp_path):
    import io

    from tb_attn_plugin.text.units import flops_rate_text
    from tb_attn_plugin.sweeps.table import metrics_table

    _, res = small_sweep
    lines = metrics_table(list(res)).splitlines()
    head = lines[0].split()
    assert head[:3] == ["backend", "B", "L"] and "FLOP rate" in lines[0] and "tokens/s" in head
    assert "%" not in lines[0]  # no peak is known for a CPU: the column is left out
    ok = [r for r in res if r["status"] == "ok"]
    assert len(lines) == 2 + len(ok)
    for r, line in zip(ok, lines[2:]):
        cells = line.split()
        assert cells[:3] == [r["backend"], str(r["batch"]), str(r["seq_len"])]
        # the median as printed (3 significant figures in its unit) is the record's
        value, unit = float(cells[3]), cells[4]
        assert math.isclose(value * {"s": 1, "ms": 1e-3, "µs": 1e-6}[unit], r["median_s"], rel_tol=5e-3)
        # the FLOP rate in the unit that reads, never a bare 'TFLOP/s 9.54e-05'
        at = next(i for i, c in enumerate(cells) if c.endswith("FLOP/s"))
        scale = {"TFLOP/s": 1.0, "GFLOP/s": 1e-3, "MFLOP/s": 1e-6, "kFLOP/s": 1e-9}[cells[at]]
        assert 1 <= float(cells[at - 1]) < 1000 and math.isclose(float(cells[at - 1]) * scale, r["tflops"], rel_tol=5e-3)
    # and the sweep prints it after the Compare table
    buf = io.StringIO()
    one = sweep(tmp_path, backends="math", seq_len="64", batch="1", out=buf)
    text = buf.getvalue()
    assert text.index("Times are in") < text.index("max |err|") < text.index("FLOPs: FlashAttention convention")
    assert flops_rate_text(one[0]["tflops"]) in text.split("max |err|")[1]


def test_warnings_of_the_first_call_are_replayed_once_per_sweep():
    # the first warm-up call runs under refusal.capture(); what it warned is shown once, not per cell
    import warnings

    from tb_attn_plugin.sweeps import refusal

    with refusal.capture() as caught:
        warnings.warn("a213 this backend is slow here", UserWarning)
    assert len(caught) == 1
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        refusal.replay(caught)
        refusal.replay(caught)  # the next cell warns the same
    assert [str(w.message) for w in shown] == ["a213 this backend is slow here"]
