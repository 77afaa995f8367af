"""Hostile inputs by class, through the real CLI in a subprocess: non-regular files (FIFO, device,
socket) named directly or found in a directory, gzip bombs under a size limit, an out-of-memory under
a real address-space limit, and JSON that is not a trace. Each is one line naming the file and the
cause, exit status 2, never a traceback or a hang."""

from __future__ import annotations

import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import zlib

import pytest

from tests.conftest import REPO, recorded_trace

CLI = [sys.executable, "-m", "tb_attn_plugin"]


def cli(*args, env=None, timeout=60, preexec=None):
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, env=full_env,
                          preexec_fn=preexec, cwd=REPO)


def one_error(proc, path: str, cause: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tb-attn: error:")]
    assert any(e.startswith(f"tb-attn: error: {path}: ") and cause in e for e in errors), proc.stderr


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "host_1.1.pt.trace.json"
    os.mkfifo(p)  # nobody ever writes it: opening it for reading would block forever
    return p


def test_a_fifo_named_directly_is_refused_without_blocking(fifo):
    proc = cli("report", str(fifo), timeout=30)
    one_error(proc, str(fifo), "is a FIFO (named pipe), not a trace file")


def test_a_fifo_found_in_a_directory_is_refused_and_the_rest_analysed(fifo, tmp_path):
    (tmp_path / "good.pt.trace.json.gz").write_bytes(recorded_trace("small").read_bytes())
    proc = cli("report", str(tmp_path), "-q", timeout=60)
    one_error(proc, str(fifo), "FIFO")
    assert "attention: 1 call," in proc.stdout  # the good trace next to it is still reported


def test_a_character_device_is_refused():
    proc = cli("report", "/dev/zero", timeout=30)  # never read: it would never end
    one_error(proc, "/dev/zero", "is a character device, not a trace file")


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.json"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
        proc = cli("report", str(path), timeout=30)
    finally:
        s.close()
    one_error(proc, str(path), "is a socket, not a trace file")


def _bomb(path, inflated: int) -> int:
    """A real trace whose last event is followed by ``inflated`` bytes of spaces (valid JSON
    whitespace), a few hundred KB on disk. The 1 MiB block of spaces is deflated once after a full
    flush (so it refers to nothing before it) and written as many times as needed; the gzip trailer
    (CRC-32, length) is computed over the whole text, so the file is a valid gzip stream."""
    head = gzip.decompress(recorded_trace("small").read_bytes()).rstrip()
    assert head.endswith(b"}")
    head, tail = head[:-1], b"}"
    block = b" " * (1 << 20)
    n = inflated >> 20
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc = zlib.crc32(head)
    with open(path, "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
        fh.write(c.compress(head) + c.flush(zlib.Z_FULL_FLUSH))
        deflated = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
        for _ in range(n):
            fh.write(deflated)
            crc = zlib.crc32(block, crc)
        fh.write(c.compress(tail) + c.flush())
        crc = zlib.crc32(tail, crc)
        fh.write(struct.pack("<II", crc & 0xFFFFFFFF, (len(head) + n * len(block) + len(tail)) & 0xFFFFFFFF))
    return path.stat().st_size


def test_a_gzip_bomb_stops_at_the_limit(tmp_path):
    path = tmp_path / "bomb.pt.trace.json.gz"
    size = _bomb(path, 200 << 20)
    assert size < 400_000  # 200 MiB inflated from a few hundred KB
    proc = cli("report", str(path), env={"TB_ATTN_MAX_TRACE_BYTES": "16M"})
    one_error(proc, str(path), "inflates to more than 16.0 MiB, the limit for one trace (TB_ATTN_MAX_TRACE_BYTES)")
    # Within a larger limit the same file is a trace (the spaces are valid JSON whitespace).
    proc = cli("report", str(path), "-q", env={"TB_ATTN_MAX_TRACE_BYTES": "256M"}, timeout=120)
    assert proc.returncode == 0 and "attention: 1 call," in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("inflater", ["isal", "stdlib"])
def test_the_bound_holds_whichever_inflates(tmp_path, monkeypatch, inflater):
    from tb_attn_plugin.format.errors import TraceError
    from tb_attn_plugin.trace import read

    if inflater == "isal" and read._fast_gzip is None:
        if os.environ.get("TB_ATTN_REQUIRE_NATIVE"):
            pytest.fail("isal is not installed (scripts/test.sh installs the [fast] extra)")
        pytest.skip("isal is not installed")
    if inflater == "stdlib":
        monkeypatch.setattr(read, "_fast_gzip", None)
    path = tmp_path / "bomb.json.gz"
    _bomb(path, 64 << 20)
    monkeypatch.setenv("TB_ATTN_MAX_TRACE_BYTES", "8M")
    with pytest.raises(TraceError, match="inflates to more than 8.0 MiB"):
        read.read_trace_text(str(path))
    monkeypatch.setenv("TB_ATTN_MAX_TRACE_BYTES", "80M")
    text, warnings = read.read_trace_text(str(path))
    assert len(text) > 64 << 20 and warnings == []
    # Two members inflate to the sum of both: the bound counts all of them.
    two = tmp_path / "two.json.gz"
    two.write_bytes(path.read_bytes() * 2)
    monkeypatch.setenv("TB_ATTN_MAX_TRACE_BYTES", str(len(text) + 100))
    with pytest.raises(TraceError, match="inflates to more than"):
        read.read_trace_text(str(two))


def test_a_plain_file_over_the_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.pt.trace.json"
    path.write_bytes(gzip.decompress(recorded_trace("sdpa").read_bytes()))
    proc = cli("report", str(path), env={"TB_ATTN_MAX_TRACE_BYTES": "10K"})
    one_error(proc, str(path), "more than 10.0 KiB, the limit for one trace")
    proc = cli("report", str(path), env={"TB_ATTN_MAX_TRACE_BYTES": "lots"})
    one_error(proc, str(path), "TB_ATTN_MAX_TRACE_BYTES='lots' is not a size")


def test_the_default_limit_follows_the_memory_available():
    from tb_attn_plugin.trace import limits

    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY)); "
            "from tb_attn_plugin.trace import limits; print(limits.max_trace_bytes())")
    env = {k: v for k, v in os.environ.items() if k != limits.ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(env, PYTHONPATH=str(REPO)),
                         timeout=60, check=True).stdout
    assert int(out) == (3 << 30) // 3  # a third of what this process may allocate


def test_out_of_memory_under_a_real_limit_is_one_line(tmp_path):
    """The bound lifted (TB_ATTN_MAX_TRACE_BYTES=100G) and the address space capped at 448 MiB: a
    bomb of 1 GiB cannot be inflated, and that is one line, exit 2. (The CLI reports a small trace
    under 256 MiB; the cap was 1.5 GiB and the bomb 2 GiB, the same test at 58.7 s, now smaller.)"""
    path = tmp_path / "oom.pt.trace.json.gz"
    _bomb(path, 1 << 30)

    def cap():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (448 << 20, resource.RLIM_INFINITY))

    proc = cli("report", str(path), env={"TB_ATTN_MAX_TRACE_BYTES": "100G"}, preexec=cap, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "not enough memory" in proc.stderr or "out of memory" in proc.stderr, proc.stderr[-2000:]
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr
    proc = cli("report", str(path), "--json", env={"TB_ATTN_MAX_TRACE_BYTES": "100G"}, preexec=cap, timeout=300)
    assert proc.returncode == 2 and "memory" in json.loads(proc.stdout)["error"], proc.stdout[-2000:]


@pytest.mark.parametrize("text,kind", [(b"null", "null"), (b'"a trace"', "a string"), (b"42", "a number"),
                                       (b"true", "a boolean")])
def test_valid_json_that_is_not_a_trace_says_so(tmp_path, text, kind):
    path = tmp_path / "x.pt.trace.json"
    path.write_bytes(text)
    one_error(cli("report", str(path)), str(path), f"JSON but not a trace: the document is {kind}")


def test_json_errors_are_a_json_object(tmp_path, fifo):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"null")
    proc = cli("report", str(bad), "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["error"].startswith(f"{bad}: JSON but not a trace") and doc["errors"][0]["path"] == str(bad)
    good = tmp_path / "good.json.gz"
    good.write_bytes(recorded_trace("small").read_bytes())
    proc = cli("report", str(good), str(fifo), "--json", "-q")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and len(doc["reports"]) == 1 and doc["reports"][0]["calls"] == 1
    assert [e["path"] for e in doc["errors"]] == [str(fifo)] and "error" not in doc
    proc = cli("compare", str(good), str(bad), "--json", "-q")
    assert proc.returncode == 2 and json.loads(proc.stdout)["error"].startswith(f"{bad}: ")
