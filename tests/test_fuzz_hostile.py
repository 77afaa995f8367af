"""The fuzz harness's hostile-structure classes in CI's short mode (tests/fuzz_hostile.py; the long mode is
scripts/fuzz_long.py, its counts in docs/robustness.md): each generator makes its class's structure,
the oracle for time and memory per input byte can fail, every class's cases end cleanly, and an
interrupted long run leaves no process behind."""

from __future__ import annotations

import gzip
import json
import os
import pickletools
import signal
import subprocess
import sys
import time

import pytest

from tests import fuzz_hostile as H
from tests.conftest import REPO, session_processes

SHORT = int(os.environ.get("TB_ATTN_FUZZ_HOSTILE", "0") or 0) or 40  # cases per class in CI


def _members(data: bytes) -> int:
    n = 0
    import zlib

    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        data = d.unused_data
        n += 1
    return n


def _ops(data: bytes) -> list[tuple[str, object]]:
    return [(op.name, arg) for op, arg, _ in pickletools.genops(data)]


def test_each_generator_makes_its_class_structure():
    """Over the short mode's seeds, each class holds the shape the issue names (not only values)."""
    seen = {k: 0 for k in H.CLASSES}
    for seed in range(7 * 12):
        case = H.make_hostile_case(seed)
        seen[case.klass] += 1
        if case.klass == "bent_dims":
            doc = json.loads(case.files["t.pt.trace.json"])
            dims = [e["args"]["Input Dims"] for e in doc["traceEvents"] if isinstance(e.get("args"), dict)
                    and "Input Dims" in e["args"]]
            assert any(d in H.BENT_WHOLE or (isinstance(d, list) and any(t in H.BENT_TENSORS for t in d[:4]))
                       for d in dims), seed
        elif case.klass == "long_name":
            doc = json.loads(case.files["t.pt.trace.json"])
            names = [str(e.get("name")) for e in doc["traceEvents"] if isinstance(e, dict)]
            names += [str(p.get("name")) for p in doc.get("deviceProperties") or [] if isinstance(p, dict)]
            assert max(map(len, names)) >= 4000, seed
        elif case.klass == "gzip_split":
            assert _members(case.files["t.pt.trace.json.gz"]) >= 4, seed
            text = gzip.decompress(case.files["t.pt.trace.json.gz"])
            assert b'"traceEvents"' in text and text.count(b" ") > 0
        elif case.klass in ("memo", "shared_refs"):
            (name, data), = case.files.items()
            data = gzip.decompress(data) if name.endswith(".gz") else data
            ops = _ops(data)
            if case.klass == "memo":
                assert any(o in ("LONG_BINPUT", "PUT") and int(a) > 1024 for o, a in ops), seed
            else:
                gets = sum(o in ("BINGET", "LONG_BINGET", "GET") for o, _ in ops)
                assert gets >= 9, (seed, gets)  # one object written once, fetched again for each repeat
        elif case.klass == "sweep_cell":
            assert case.sweep.count(b"\n") >= 1 and case.sweep.endswith(b"\n")
        else:
            assert case.fifos, seed
    assert all(n >= 10 for n in seen.values()), seen
    # and over all seeds of a class, the hostile values the issue names appear
    sweeps = b"".join(H.make_hostile_case(s, "sweep_cell").sweep for s in range(60))
    assert b"1e400" in sweeps and b"[1, 2]" in sweeps and b"1e-300" in sweeps and b"1" + b"0" * 400 in sweeps


@pytest.mark.parametrize("klass", ["gzip_split", "memo", "shared_refs", "bent_dims", "long_name", "sweep_cell", "fifo"])
def test_hostile_class_cases_end_cleanly(klass):
    """SHORT cases of the class (seeds 0..): exit 0 or 2 with one error line, no traceback, strict finite
    JSON, no hang, and within the oracle's CPU time and peak RSS per input byte. Stops at the first
    problem."""
    for seed in range(SHORT):
        _, problems, _ = H.quiet_run(seed, klass)
        assert not problems, "\n".join(problems[:5])


def test_the_oracle_fails_a_case_past_its_bounds(monkeypatch):
    """With the bounds at zero, a real case is "slow" and "memory"; with the real bounds it is neither
    (so a failure of the classes above is the input's doing, not the oracle's)."""
    _, problems, m = H.quiet_run(0, "gzip_split")
    assert not problems and m["cpu_s"] > 0 and m["bytes"] > 0
    monkeypatch.setattr(H, "TIME_FLOOR_S", 0.0)
    monkeypatch.setattr(H, "TIME_PER_MB_S", 0.0)
    monkeypatch.setattr(H, "MEM_FLOOR", 0)
    monkeypatch.setattr(H, "MEM_PER_BYTE", 0)
    _, problems, m = H.quiet_run(1, "bent_dims")
    kinds = {p.split(":", 1)[0] for p in problems}
    assert "slow" in kinds, problems
    assert any(p.startswith("slow:") and "bound 0 s + 0 s/MB" in p for p in problems)
    if m["rss_grew"] > 0:
        assert "memory" in kinds, (problems, m)


BUSY_RUN = ["--http-every", "1", "--http-batch", "3", "--save-every", "1"]




@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigint_to_the_long_run_leaves_no_process_and_its_counts(tmp_path):
    """SIGINT while the long run has the plugin's workers busy with an HTTP batch: the run saves its
    counts, exits 130, and nothing of its session is left within 30 s; --resume goes on from there."""
    out = tmp_path / "counts.json"
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "fuzz_long.py"), "--out", str(out), *BUSY_RUN],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        deadline = time.monotonic() + 240
        while not any("forkserver" in c or "multiprocessing" in c for c in session_processes(proc.pid)):
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "no worker started"
            time.sleep(0.2)
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130, proc.stderr.read()[-2000:]
        deadline = time.monotonic() + 30
        while session_processes(proc.pid):
            assert time.monotonic() < deadline, session_processes(proc.pid)
            time.sleep(0.2)
        doc = json.loads(out.read_text())
        assert doc["cli_cases"] >= 1 and doc["next_seed"] > doc["first_seed"]
        # --resume goes on from the saved seed with the saved counts
        total = doc["cli_cases"] + doc["hostile_cases"] + doc["http_cases"]
        subprocess.run([sys.executable, str(REPO / "scripts" / "fuzz_long.py"), "--out", str(out), "--resume",
                        "--cases", str(total + 2), "--http-every", "100000"], check=True, capture_output=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=300)
        again = json.loads(out.read_text())
        assert again["first_seed"] == doc["first_seed"] and again["next_seed"] == doc["next_seed"] + 1
        assert again["cli_cases"] == doc["cli_cases"] + 1 and again["hostile_cases"] == doc["hostile_cases"] + 1
    finally:
        if proc.poll() is None:
            proc.kill()
        if session_processes(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_long_runs_forked_workers_end_with_it(tmp_path):
    """The long run's workers (forked, two here) busy with cases: a SIGINT kills them, removes their
    temporary directory and saves the counts of the finished blocks (exit 130); a SIGKILL to the run
    takes its workers with it (PR_SET_PDEATHSIG), so nothing of its session runs on either way."""
    import tempfile

    for how in (signal.SIGINT, signal.SIGKILL):
        out = tmp_path / f"counts{how}.json"
        proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "fuzz_long.py"), "--out", str(out), "--workers", "2",
                                 "--save-every", "1", "--http-every", "100000"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
        try:
            deadline = time.monotonic() + 240
            while not out.exists() or len(session_processes(proc.pid)) < 2:  # a block counted, both workers on
                assert proc.poll() is None, proc.stderr.read()[-2000:]
                assert time.monotonic() < deadline, "no block finished"
                time.sleep(0.2)
            os.kill(proc.pid, how)
            assert proc.wait(60) == (130 if how == signal.SIGINT else -signal.SIGKILL)
            deadline = time.monotonic() + 30
            while session_processes(proc.pid):
                assert time.monotonic() < deadline, session_processes(proc.pid)
                time.sleep(0.2)
            if how == signal.SIGINT:
                assert json.loads(out.read_text())["cli_cases"] >= 1
                mine = f"tb-attn-fuzz-run-{proc.pid}-"  # the workers' temporary directories are under it
                assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(mine)]
        finally:
            if proc.poll() is None:
                proc.kill()
            if session_processes(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
