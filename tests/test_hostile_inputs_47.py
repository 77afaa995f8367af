"""Hostile inputs of issue 47, one builder per class: bent SDPA shapes, adversarial kernel names for
the built-in tables, junk before the C scanner, a FIFO as a pattern file, a hostile ``sweep.jsonl``,
paths and names, and the CLI's small faults. Each test fails on the code before the issue's fix.

The traces bent here are the real CPU traces the suite records (tests/recorded.py): one SDPA op
per call, ``Input Dims`` as torch.profiler writes them (``[[2, 4, 32, 16], ...]``)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from tb_attn_plugin.attention import shapes
from tb_attn_plugin.reading import why_not_flash
from tests.conftest import REPO, recorded_trace

SDPA = "aten::scaled_dot_product_attention"


def cli(*args, cwd=None, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "tb_attn_plugin", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


def one_error_line(proc, code: int = 2) -> str:
    """The CLI's contract for bad input: the exit status, one line on stderr, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- item 6: bent SDPA shapes ---------------------------------------------------------------------
def _recorded(role: str = "sdpa") -> dict:
    return json.loads(gzip.decompress(recorded_trace(role).read_bytes()))


BENDS = {
    # the key recorded with one dimension (was IndexError in why_not_flash._causal_square)
    "key_1d": lambda d: [d[0], [d[1][-1]], d[2], *d[3:]],
    # zero heads everywhere (was ZeroDivisionError in why_not_flash._heads_cudnn: q_heads % k_heads)
    "zero_heads": lambda d: [[x[0], 0, *x[2:]] for x in d[:3]] + d[3:],
    # 2-D q, k, v: an input SDPA's math path takes, fused ones refuse (was IndexError reading heads)
    "two_d": lambda d: [x[-2:] for x in d[:3]] + d[3:],
    # a dimension no tensor has
    "huge": lambda d: [[x[0], x[1], 10 ** 30, x[3]] for x in d[:3]] + d[3:],
}


def bent_sdpa_trace(tmp_path, bend: str) -> str:
    doc = _recorded("sdpa")
    n = 0
    for e in doc["traceEvents"]:
        if e.get("name") == SDPA and "Input Dims" in e.get("args", {}):
            e["args"]["Input Dims"] = BENDS[bend](e["args"]["Input Dims"])
            n += 1
    assert n, "the recorded trace has no SDPA op with Input Dims"
    path = tmp_path / f"bent_{bend}.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("bend", sorted(BENDS))
def test_bent_sdpa_shapes_give_a_report_with_the_reading_unknown(tmp_path, bend):
    path = bent_sdpa_trace(tmp_path, bend)
    proc = cli("report", "--json", path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (r,) = json.loads(proc.stdout)["reports"]
    assert r["calls"] > 0
    for lay in r["layers"]:
        if bend == "two_d":  # read: every fused backend refuses 2-D inputs, the other checks are unknown
            backends = lay["why_not_flash"]["backends"]
            assert all(b["eligible"] is False for b in backends)
            assert all([x["check"] for x in b["refusals"]] == ["check_tensor_shapes"] for b in backends)
            assert all("q 2-D, k 2-D, v 2-D" in b["refusals"][0]["reason"] for b in backends)
        else:
            assert lay["why_not_flash"] is None
            assert lay["why_not_flash_unknown"].startswith(f"unknown: its {SDPA} recorded a shape it cannot read")


def test_the_plugin_worker_answers_a_report_not_please_report_this(tmp_path):
    from tb_attn_plugin.plugin import work

    for bend in ("key_1d", "zero_heads"):
        status, error, _, _ = work.analyze(bent_sdpa_trace(tmp_path, bend), f"run/{bend}.json")
        assert status != "error", error


def test_one_helper_says_why_a_shape_is_bent():
    assert shapes.sdpa_qkv([[2, 4, 8, 16]] * 3) == ([[2, 4, 8, 16]] * 3, None)
    assert shapes.sdpa_qkv([[2, 4, 8, 16], [], [2, 4, 8, 16]]) == (None, None)  # not recorded: no shapes
    assert shapes.sdpa_qkv([[2, 4, 8, 16], [16], [2, 4, 8, 16]])[1] == (
        "key: 1 dimension ([16]) where at least 2 are needed")
    assert shapes.sdpa_qkv([[2, 0, 8, 16]] * 3)[1] == "query: heads 0 ([2, 0, 8, 16])"
    assert shapes.sdpa_qkv([[2, 4, 8, -1]] * 3)[1] == "query: a shape no tensor has ([2, 4, 8, -1])"
    assert shapes.sdpa_qkv([[2, 4, 8, "16"]] * 3)[1].startswith("query: a shape no tensor has")
    x, why = why_not_flash.inputs_of([[2, 4, 8, 16], [2, 4, 8, 16], [2, 4, 8, 16], [8, -3]], None, None, None, None)
    assert why is None and x.mask_known is False  # a bent mask is not "no mask"


# -- item 7: names built to make a backtracking regex slow ---------------------------------------
def _adversarial():
    import importlib.util

    spec = importlib.util.spec_from_file_location("adversarial_names", REPO / "bench" / "adversarial_names.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KIB64 = 64 * 1024


def _is_re2(rx) -> bool:
    from tb_attn_plugin.format.linear_regex import Linear

    return isinstance(rx, Linear) and type(rx.program).__module__.startswith("re2")


def test_every_built_in_name_table_is_compiled_linear():
    """The tables that read names out of a trace run on RE2, like the user's (on 216150a: Python re)."""
    from tb_attn_plugin.attention import helper_kernels, patterns as P, safety
    from tb_attn_plugin.memory import frame_rules
    from tb_attn_plugin.reading import expectations, fingerprint, host_cost
    from tb_attn_plugin.roofline import devices
    from tb_attn_plugin.trace import window

    programs = P._BUILT_IN.programs + P._OP_RULES.programs + [
        P.BACKWARD_NODE_SUFFIX, P.ATTENTION_MODULE, P.ATTENTION_MODULE_EXCLUDE, P.COMPILED_REGION, P.TRITON_OP,
        window._LAUNCH, window.CAPTURE_BEGIN, window.CAPTURE_END, frame_rules.NODE_NAME, frame_rules.TORCH_FILES,
        frame_rules.PYTHON_FILE, expectations.HOST_SCALAR_PARENTS, expectations.FP32_GEMM, devices._STATES_MEMORY,
        safety._GENERIC, safety._QUALIFIED]
    programs += [rx for _, rx, _ in fingerprint._COMPILED] + [rx for rx, _ in host_cost._COMPILED]
    programs += [rx for _, rx in helper_kernels._COMPILED] + [rx for rx, _ in devices._COMPILED]
    programs += [rx for r in frame_rules._compiled() for rx in (r.name, r.file) if rx is not None]
    programs += [getattr(c, f"{k}_rx") for c in expectations.CAUSES for k in ("item", "inside", "not_inside", "within",
                                                                             "item_not") if getattr(c, k)]
    programs += [rx for rx, _ in safety._TAILS]
    # the step overview's role and phase tables, and the snapshot structure's file rules
    from tb_attn_plugin.memory import structure
    from tb_attn_plugin.overview import phase_rules, rules as overview_rules, steps

    for table in (overview_rules.COMMUNICATION, overview_rules.MEMCPY_DIRECTIONS, overview_rules.SYNC_CALLS,
                  overview_rules.HOST_OPS):
        programs.append(overview_rules._any(table))
        programs += [overview_rules.role_pattern(table, r.role) for r in table]
    programs += [*phase_rules._QUERY.programs, *phase_rules._PAGED.programs, *phase_rules._ANY.values(), steps._GEMM, structure.MODULE_CALL,
                 structure.GENERATED]
    assert len(programs) > 150 and all(_is_re2(rx) for rx in programs)


def test_64k_adversarial_names_get_the_tables_answers():
    """Each name here took seconds on Python re (bench/adversarial_names.py); the answers are checked."""
    from tb_attn_plugin.attention import patterns as P
    from tb_attn_plugin.memory import frame_rules
    from tb_attn_plugin.roofline import devices

    adv = _adversarial()
    names = adv.names(KIB64)
    for name in names.values():  # none of these is a kernel, op, module or device any table knows
        assert P.kernel_family.__wrapped__(name) is None
        assert P.op_rule.__wrapped__(name) is None
        assert devices.by_name(name) is None
    # the same prefixes before real names: the real name's family still wins (search is unanchored)
    pre = names["flash_traits"] + " "
    for fam in P.KERNEL_FAMILIES:
        if not fam.pattern.startswith("^"):
            assert P.kernel_family.__wrapped__(pre + fam.example) is P.kernel_family.__wrapped__(fam.example), fam.family
    # an op rule read whole: a 64 KiB Function name that is one (\w*(Attn|Attention)\w*(Func|Function)\w*)
    assert P.op_rule.__wrapped__(names["attn_func"][:-1] + "Func").rule == "attention_functions"
    # a memory frame: the node named by a 64 KiB C++ symbol
    frame = names["backward_frames"] + "SoftmaxBackward0::apply"
    assert frame_rules.node_name(frame) == frame[:-len("::apply")]
    assert frame_rules.node_name(names["backward_frames"]) is None
    assert P.is_attention_module.__wrapped__(names["attn_func"]) is True


# -- item 5: the C scanner on junk ---------------------------------------------------------------
def _scanner():
    from tb_attn_plugin.trace import native
    from tests.test_scanner import RULES

    if not native.available:
        pytest.skip("the C scanner is not built (python setup.py build_ext --inplace)")
    return native._scan_events, RULES


def test_the_scanner_gives_no_event_from_junk_nor_a_position_past_its_input():
    """tests/test_scanner.py::test_any_bytes_any_start_no_crash failed on about one seed in six on
    216150a: b'\\x00,' with a budget of 0 gave the event b'\\x00' and a next position of 2 (its length)."""
    scan, rules = _scanner()
    assert scan(b"\x00,", 0, 0, *rules) == (None, 0, 0, False)
    assert scan(b"1,", 0, 0, *rules) == (None, 0, 0, False)  # cut after a ',': no next position inside
    assert scan(b'{"ph": "X"},{}]', 0, 0, *rules)[2] == 12  # a real event then the budget: the next one's start


def test_every_short_text_over_json_bytes_keeps_the_scanners_contract():
    """Every text of up to 3 bytes over JSON's structural bytes and junk, from every start, at budgets
    0, 1 and 5: "not understood", or a well-formed array of items that are JSON values and a next
    position inside the text (the property test's contract, exhaustively instead of by chance)."""
    import itertools

    scan, rules = _scanner()
    alphabet = [bytes([c]) for c in b'\x00{}[],"1 a']
    for n in (1, 2, 3):
        for parts in itertools.product(alphabet, repeat=n):
            data = b"".join(parts)
            for pos in range(len(data) + 1):
                for budget in (0, 1, 5):
                    out, dropped, nxt, done = scan(data, pos, budget, *rules)
                    if out is None:
                        assert (dropped, nxt, done) == (0, 0, False)
                        continue
                    assert out.startswith(b"[") and out.endswith(b"]") and pos <= nxt < len(data), (data, pos, budget)
                    assert not done or data[nxt:nxt + 1] == b"]"
                    assert b"\x00" not in out and b"a" not in out.replace(b'"a', b"")  # no junk item


# -- item 12: a FIFO or a device as a pattern file ------------------------------------------------
@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "patterns.toml"
    os.mkfifo(path)  # nobody writes it: open() for reading blocks forever (216150a did)
    return str(path)


def test_a_fifo_as_patterns_is_refused_in_one_line(tmp_path, fifo):
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(recorded_trace("small").read_bytes())
    line = one_error_line(cli("report", "--patterns", fifo, str(trace), timeout=60))
    assert line == f"tb-attn: error: {fifo}: is a FIFO (named pipe), not a pattern file; only regular files are read"
    line = one_error_line(cli("compare", "--patterns", "/dev/zero", str(trace), str(trace), timeout=60))
    assert "/dev/zero: is a character device, not a pattern file" in line


def test_a_fifo_in_tb_attn_patterns_is_refused_where_the_plugin_reads_it(fifo):
    """TB_ATTN_PATTERNS is read by the plugin (its start check, its cache key, each worker): each
    reads through user_table._read; in a subprocess so that a blocking open fails the test, not hangs it."""
    code = ("from tb_attn_plugin.attention import user_table as U\n"
            "try:\n    U.load_files(U.env_paths())\nexcept U.PatternError as e:\n    print(e)\n"
            "print(len(U.fingerprint()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO), TB_ATTN_PATTERNS=fifo))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{fifo}: is a FIFO (named pipe), not a pattern file; only regular files are read",
                                        "16"]


# -- item 11: a hostile sweep.jsonl behind /sweep --------------------------------------------------
def _sweep_cell(backend: str, seq_len: int, median_s: float, **bend) -> dict:
    """A cell as `tb-attn sweep` writes it (sweeps/runner.py: the identifying fields, status, times)."""
    cell = {"backend": backend, "batch": 1, "seq_len": seq_len, "heads": 8, "kv_heads": 8, "head_dim": 64,
            "dtype": "float32", "causal": False, "pass": "fwd", "device": "cpu", "module": None, "status": "ok",
            "median_s": median_s, "iqr_s": median_s / 100, "times_s": [median_s] * 5}
    return {**cell, **bend}


def _good_cells() -> list[dict]:
    return [_sweep_cell("math", L, 1e-3 * (L / 128) ** 2) for L in (128, 256, 512)] + [
        _sweep_cell("flash", L, 1.5e-3 * (L / 128)) for L in (128, 256, 512)]


HOSTILE_SWEEPS = {
    # each: lines appended after the six good cells, and the 1-based line the note must name
    "list_field": ['{"backend": "math", "batch": 1, "seq_len": 64, "status": "ok", "heads": [8], "median_s": 0.001}'],
    "huge_seq_len": ['{"backend": "math", "batch": 1, "seq_len": 1' + "0" * 400 + ', "status": "ok", "median_s": 0.001}'],
    "tiny_median": [json.dumps(_sweep_cell("math", 1024, 1e-300)), json.dumps(_sweep_cell("flash", 1024, 1e300))],
    "nan_median": ['{"backend": "math", "batch": 1, "seq_len": 2048, "status": "ok", "median_s": NaN}'],
}


@pytest.fixture(scope="module")
def sweep_app(tmp_path_factory):
    from tests.conftest import make_tb_app, wait_for

    root = tmp_path_factory.mktemp("hostile_sweeps")
    for run, extra in HOSTILE_SWEEPS.items():
        (root / run).mkdir()
        (root / run / "sweep.jsonl").write_text("\n".join([json.dumps(c) for c in _good_cells()] + extra) + "\n")
    client, plugins = make_tb_app(root, tmp_path_factory.mktemp("cache"))
    wait_for(lambda: len(json.loads(client.get("/data/plugin/tb_attn/sweeps").data)["sweeps"]) == len(HOSTILE_SWEEPS))
    yield client
    plugins["tb_attn"].close()


@pytest.mark.parametrize("run", sorted(HOSTILE_SWEEPS))
def test_a_hostile_sweep_answers_200_with_its_valid_cells_and_a_note_per_bad_line(sweep_app, run):
    r = sweep_app.get(f"/data/plugin/tb_attn/sweep?run={run}")
    assert r.status_code == 200, r.data[:300]  # 216150a: 500 (TypeError, OverflowError) or 422 (math domain error)
    doc = json.loads(r.data)
    assert len(doc["cells"]) == 6 and doc["skipped_lines"] == len(HOSTILE_SWEEPS[run])
    assert [n.split(":")[0] for n in doc["skipped_notes"]] == [f"line {7 + i}" for i in range(len(HOSTILE_SWEEPS[run]))]
    # the analysis of the six real cells: math's time grows as L^2, flash's as L (fitted exponents)
    fits = {f["backend"]: f["time_exponent"] for f in doc["analysis"]["fits"]}
    assert fits == pytest.approx({"math": 2.0, "flash": 1.0})


def test_the_notes_say_why_each_line_is_no_cell():
    from tb_attn_plugin.sweeps import store

    lines = [json.dumps(_good_cells()[0])] + HOSTILE_SWEEPS["list_field"] + HOSTILE_SWEEPS["huge_seq_len"] + \
        HOSTILE_SWEEPS["tiny_median"]
    records, notes = store.parse(lines)
    assert len(records) == 1
    assert notes == ["line 2: heads is a JSON list, not a value",
                     "line 3: seq_len 100000000000... (401 digits) is no tensor size (an integer from 1 to 2^40)",
                     "line 4: median_s 1e-300 is no time a timer measures (1e-12 to 1e+06 s)",
                     "line 5: median_s 1e+300 is no time a timer measures (1e-12 to 1e+06 s)"]


# -- item 14: paths as given, names checked to the end, copies strict JSON ------------------------
def test_a_relative_directory_is_named_as_given_in_reports_and_errors(tmp_path):
    (tmp_path / "logs" / "run1").mkdir(parents=True)
    (tmp_path / "logs" / "run1" / "w.1.pt.trace.json.gz").write_bytes(recorded_trace("small").read_bytes())
    (tmp_path / "logs" / "run1" / "bad.2.pt.trace.json").write_bytes(b"garbage")
    proc = cli("report", "--json", "logs", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("tb-attn: error: logs/run1/bad.2.pt.trace.json: not JSON: "
                                   "a trace starts with '{' or '['")
    doc = json.loads(proc.stdout)
    assert [r["source"]["path"] for r in doc["reports"]] == ["logs/run1/w.1.pt.trace.json.gz"]
    assert [e["path"] for e in doc["errors"]] == ["logs/run1/bad.2.pt.trace.json"]
    assert str(tmp_path) not in proc.stdout + proc.stderr  # 216150a printed /tmp/.../logs/run1/...


def test_a_family_name_ending_in_a_newline_fails_the_name_check(tmp_path):
    from tb_attn_plugin.attention import patterns as P, user_table as U

    path = tmp_path / "mine.toml"
    path.write_text('[[family]]\nname = "my_attention_fwd\\n"\npattern = "my_attn_fwd_kernel"\nstage = "fused"\n'
                    'pass = "fwd"\nimplementation = "custom"\nexample = "my_attn_fwd_kernel<128>"\nsource = "x"\n')
    try:
        with pytest.raises(U.PatternError, match="my_attention_fwd"):  # 216150a loaded it ('$' matches before \n)
            U.load_files([str(path)])
    finally:
        P.set_user_families(())


def _trace_with_a_skipped_event(tmp_path, raw_event: bytes) -> str:
    """A recorded trace with one more event of a category no list keeps, so the analysis skips it unread."""
    text = gzip.decompress(recorded_trace("small").read_bytes())
    key = b'"traceEvents": ['
    assert text.count(key) == 1
    path = tmp_path / "t.json"
    path.write_bytes(text.replace(key, key + raw_event + b",", 1))
    return str(path)


@pytest.mark.parametrize("raw_event, why", [
    (b'{"ph": "X", "cat": "user_annotation_x", "name": "n", "ts": NaN, "dur": 1, "pid": 1, "tid": 1}',
     "JSON is malformed: invalid character"),
    (b'{"ph": "X", "cat": "user_annotation_x", "name": "\xff\xfe", "ts": 1, "dur": 1, "pid": 1, "tid": 1}',
     "invalid UTF-8 at byte"),
])
def test_annotate_copies_out_no_bytes_a_strict_parser_rejects(tmp_path, raw_event, why):
    src = _trace_with_a_skipped_event(tmp_path, raw_event)
    assert cli("report", src).returncode == 0  # the analysis skips the event unread: a report, as before
    out = tmp_path / "out.json"
    line = one_error_line(cli("annotate", src, "-o", str(out)))
    assert line.startswith(f"tb-attn: error: {src}: holds bytes a strict JSON parser rejects (") and why in line
    assert not out.exists() and not list(tmp_path.glob(".tb-attn-annotate-*"))  # 216150a wrote a copy json rejects


def test_annotate_of_a_clean_trace_still_writes_strict_json(tmp_path):
    src = _trace_with_a_skipped_event(tmp_path, b'{"ph": "X", "cat": "user_annotation_x", "name": "\xc3\xa9", '
                                                b'"ts": 1, "dur": 1, "pid": 1, "tid": 1}')
    out = tmp_path / "out.json"
    proc = cli("annotate", src, "-o", str(out))
    assert proc.returncode == 0, proc.stderr

    def refuse(c):
        raise ValueError(c)

    doc = json.loads(out.read_bytes().decode("utf-8"), parse_constant=refuse)
    assert any(e.get("name") == "é" for e in doc["traceEvents"])


# -- item 4 (minors): one line for a bad --device-arch, help for every sweep option ------------------
def test_fingerprint_with_an_unknown_device_arch_is_one_line_and_exit_2():
    line = one_error_line(cli("fingerprint", "--device-arch", "banana", "flash_fwd_kernel"))  # 216150a: exit 0
    assert line == ("tb-attn: error: --device-arch 'banana' is no architecture this reads "
                    "(sm<N> as sm80 or sm90a, gfx<N> as gfx942)")
    ok = cli("fingerprint", "--device-arch", "sm90a", "flash_fwd_kernel")
    assert ok.returncode == 0 and ok.stderr == ""


def test_sweep_help_says_what_every_option_is():
    import argparse

    from tb_attn_plugin.sweeps import cli as sweep_cli

    parser = argparse.ArgumentParser()
    sweep_cli.add_parser(parser.add_subparsers(dest="command"))
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["sweep"]
    silent = [a.option_strings[0] for a in sub._actions if a.option_strings and not a.help]
    assert silent == []  # 216150a: --heads, --head-dim, --causal
    text = cli("sweep", "--help").stdout
    assert "query heads of every cell (default: 16)" in text and "is_causal=True" in text
