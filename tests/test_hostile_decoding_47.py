"""Hostile decoding (issue 47, items 8, 9, 10, 13), through the real CLI in a subprocess under a
1.5 GiB address-space limit: a memo index no pickler writes, shared pickle references that multiply
the work, gzip streams of many tiny members; and the plugin's `/annotated` under a storm. Each file
is built here from opcodes / members; each ends in exit 2 with one line naming the file and the cause,
in seconds, never a traceback, a hang or gigabytes of memory."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct
import subprocess
import sys

import pytest

from tests.conftest import REPO

CLI = [sys.executable, "-m", "tb_attn_plugin"]
AS_LIMIT = 1536 << 20  # the bound: 1.5 GiB of address space


def _cap():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, resource.RLIM_INFINITY))


def cli(*args, env=None, timeout=60):
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, env=full_env,
                          preexec_fn=_cap, cwd=REPO)


def one_error(proc, path, cause: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"tb-attn: error: {path}: ") and cause in lines[0], lines[0]
    return lines[0]


# --- item 9: a memo index no pickler writes -------------------------------------------------------

PROTO4, NONE, LONG_BINPUT, STOP, EMPTY_SET = b"\x80\x04", b"N", b"r", b".", b"\x8f"


def test_a_9_byte_pickle_asking_for_a_4_gb_memo_is_refused(tmp_path):
    # PROTO 4, NONE, LONG_BINPUT 2**28, STOP (pickletools' opcode names): the unpickler would
    # zero-fill a memo table of 2**29 pointers (4 GiB) to store one None.
    data = PROTO4 + NONE + LONG_BINPUT + struct.pack("<I", 1 << 28) + STOP
    assert len(data) == 9
    p = tmp_path / "memo.pickle"
    p.write_bytes(data)
    one_error(cli("report", str(p)), p, "memo index 268435456")


def test_the_plain_unpickler_path_refuses_it_too(tmp_path):
    # EMPTY_SET first: the C decoder does not take sets and hands the file to the plain unpickler,
    # which must refuse the memo index before it runs.
    data = PROTO4 + EMPTY_SET + LONG_BINPUT + struct.pack("<I", 1 << 28) + STOP
    p = tmp_path / "memo_set.pickle"
    p.write_bytes(data)
    one_error(cli("report", str(p)), p, "memo index 268435456")


def test_memo_indexes_as_picklers_number_them_still_load():
    # Every protocol's pickler, memo cleared or not, stays within the bound (the scan finds nothing).
    from tb_attn_plugin.memory import safe_pickle

    doc = {"device_traces": [[{"action": "alloc", "frames": [{"filename": "m.py", "line": i}] * 3}
                              for i in range(3000)]], "segments": []}
    for protocol in range(0, 6):
        data = pickle.dumps(doc, protocol=protocol)
        assert safe_pickle._memo_scan(data) is None
        assert safe_pickle._memo_scan_py(data) is None


# --- item 10: shared references that multiply the work ---------------------------------------------

ENTRY = {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": 1, "frames": []}
BLOCK = {"size": 512, "state": "active_allocated", "address": 1 << 20}


def _segment(blocks):
    return {"device": 0, "address": 1 << 20, "total_size": 1 << 21, "allocated_size": 512, "blocks": blocks}


@pytest.mark.parametrize("shape,what", [
    # one segment referenced 5,000 times, its blocks list one block referenced 5,000 times: a 20 KB
    # pickle whose segments x blocks walk was 25 million steps (4.2 s on main)
    ("one segment, many references", "segment"),
    # distinct segments sharing one list of blocks
    ("one blocks list, many segments", "segment's list of blocks"),
    # one entry referenced 300,000 times in one trace (the 10 KB gzip held 3 million)
    ("one entry, many references", "trace entry"),
    # one entry in two devices' traces
    ("one entry, two devices", "trace entry"),
])
def test_a_shared_reference_is_refused(tmp_path, shape, what):
    if shape == "one segment, many references":
        doc = {"segments": [_segment([BLOCK] * 5000)] * 5000, "device_traces": [[dict(ENTRY)]]}
    elif shape == "one blocks list, many segments":
        blocks = [dict(BLOCK) for _ in range(50)]
        doc = {"segments": [_segment(blocks) for _ in range(1000)], "device_traces": [[dict(ENTRY)]]}
    elif shape == "one entry, many references":
        doc = {"segments": [], "device_traces": [[ENTRY] * 300_000]}
    else:
        doc = {"segments": [], "device_traces": [[ENTRY], [ENTRY]]}
    p = tmp_path / "shared.pickle.gz"
    p.write_bytes(gzip.compress(pickle.dumps(doc, protocol=4), 9))
    one_error(cli("report", str(p)), p, f"one {what} referenced more than once")


# --- item 8: gzip streams of many members, blanks split across their boundaries ---------------------

DOC = (b'{"traceEvents": [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, '
       b'"dur": 2.0}]}')  # a kineto-layout document (aten::mm: an op name torch records)


def _members(texts) -> bytes:
    """Each text a gzip member of its own (gzip(1) concatenations read the same way)."""
    return b"".join(gzip.compress(t, 9) for t in texts)


@pytest.mark.parametrize("where", ["before the document", "inside the document's object"])
def test_a_megabyte_of_blanks_per_member_is_refused_by_its_ratio(tmp_path, where):
    # 150 members of 1 MiB of blanks each, about 1 KB compressed: a 158 KB file of 150 MiB of text.
    # Main: 25 s (before; the head grew by copies) or 7 s (inside; the whole-text path) and exit 0.
    blanks = [b" " * (1 << 20)] * 150
    texts = blanks + [DOC] if where == "before the document" else [b"{"] + blanks + [DOC[1:]]
    p = tmp_path / "blanks.pt.trace.json.gz"
    p.write_bytes(_members(texts))
    assert p.stat().st_size < 200_000
    one_error(cli("report", str(p)), p, "over 100 times its")


def test_tiny_members_with_blanks_split_across_them_read_as_one_member(tmp_path):
    # 6,000 members of 7 blanks, then the document cut into members at every 3rd byte: read in
    # linear time, the same report as the document in one member (and the bound lifted by the
    # variable the error names).
    cut = [DOC[i:i + 3] for i in range(0, len(DOC), 3)]
    many = tmp_path / "many.pt.trace.json.gz"
    many.write_bytes(_members([b" " * 7] * 6000 + cut))
    one = tmp_path / "one.pt.trace.json.gz"
    one.write_bytes(gzip.compress(DOC))
    a, b = cli("report", str(many), "--json"), cli("report", str(one), "--json")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr[-2000:], b.stderr[-2000:])
    ra, rb = json.loads(a.stdout)["reports"][0], json.loads(b.stdout)["reports"][0]
    assert ra["source"]["json_bytes"] == 6000 * 7 + len(DOC)  # every member's text, none twice
    for r in (ra, rb):
        del r["source"], r["analysis_seconds"]
    assert ra == rb
    # 1 MiB of blanks in each of 80 members, the bound lifted: read (80 MiB of text), not refused
    big = tmp_path / "big.pt.trace.json.gz"
    big.write_bytes(_members([b" " * (1 << 20)] * 80 + [DOC]))
    assert cli("report", str(big), "-q").returncode == 2
    lifted = cli("report", str(big), "-q", env={"TB_ATTN_MAX_TRACE_BYTES": "1G"})
    assert lifted.returncode == 0, lifted.stderr[-2000:]
