"""Time and peak memory of `tb-attn report` on the hostile inputs of issue 47, items 8-10, built here.

    python bench/hostile_decoding.py [--repo CHECKOUT] [--cap-mb 3072] [--timeout 120]

Each input runs as a whole process (`/usr/bin/time`-style figures from os.wait4) under an
address-space limit (`--cap-mb`, 0: none) and a wall-clock timeout; prints one row per input:
size on disk, exit status, wall seconds, peak RSS, the error line. Run it against this checkout and
against an older one (--repo) to compare; bench/README.md has the figures.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pickle
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOC = (b'{"traceEvents": [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, '
       b'"dur": 2.0}]}')
ENTRY = {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "time_us": 1, "frames": []}
BLOCK = {"size": 512, "state": "active_allocated", "address": 1 << 20}


def _segment(blocks):
    return {"device": 0, "address": 1 << 20, "total_size": 1 << 21, "allocated_size": 512, "blocks": blocks}


def inputs(d: Path) -> dict[str, Path]:
    out = {}

    def put(name, data):
        out[name] = d / name
        out[name].write_bytes(data)

    put("memo_9_bytes.pickle", b"\x80\x04N" + b"r" + struct.pack("<I", 1 << 28) + b".")
    put("segments_shared_20kb.pickle",
        pickle.dumps({"segments": [_segment([BLOCK] * 5000)] * 5000, "device_traces": [[ENTRY]]}, protocol=4))
    put("entry_x3M.pickle.gz",
        gzip.compress(pickle.dumps({"segments": [], "device_traces": [[ENTRY] * 3_000_000]}, protocol=4), 9))
    entry = [dict(ENTRY, addr=(1 << 20) + 512 * i, time_us=i) for i in range(200_000)]
    put("entries_in_100k_lists.pickle",
        pickle.dumps({"segments": [], "device_traces": [entry[:1]], "x": [[e] for e in entry[1:100_001]]}, protocol=4))
    put("2000_devices_x100.pickle",
        pickle.dumps({"segments": [], "device_traces": [entry[k * 100:k * 100 + 100] for k in range(2000)]},
                     protocol=4))
    one_mb = gzip.compress(b" " * (1 << 20), 9)
    put("blanks_150_members.json.gz", one_mb * 150 + gzip.compress(DOC))
    put("blanks_inside_object.json.gz", gzip.compress(b"{") + one_mb * 150 + gzip.compress(DOC[1:]))
    put("tiny_members_50k.json.gz", gzip.compress(b"   ", 9) * 50_000 + gzip.compress(DOC))
    return out


def run(repo: str, path: Path, cap_mb: int, timeout: float) -> tuple[int, float, int, str]:
    """(exit status, wall seconds, peak RSS in KiB, first stderr line) of one report, from os.wait4."""
    import threading

    def cap():
        if cap_mb:
            resource.setrlimit(resource.RLIMIT_AS, (cap_mb << 20, resource.RLIM_INFINITY))

    env = dict(os.environ, PYTHONPATH=repo)
    env.pop("TB_ATTN_MAX_TRACE_BYTES", None)
    with tempfile.TemporaryFile() as err:
        t = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "tb_attn_plugin", "report", "-q", str(path)], cwd=repo, env=env,
                             stdout=subprocess.DEVNULL, stderr=err, preexec_fn=cap)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        timer.cancel()
        wall = time.monotonic() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        line = next((x for x in err.read().decode(errors="replace").splitlines() if x.strip()), "")
    return p.returncode, wall, ru.ru_maxrss, line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--cap-mb", type=int, default=3072)
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tb-attn-hostile-bench-") as tmp:
        for name, path in inputs(Path(tmp)).items():
            rc, wall, peak, line = run(args.repo, path, args.cap_mb, args.timeout)
            print(f"{name:32s} {path.stat().st_size:>8d} B  exit {rc:>3}  {wall:6.2f} s  "
                  f"peak RSS {peak / 1024:7.0f} MiB  {line[-110:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
