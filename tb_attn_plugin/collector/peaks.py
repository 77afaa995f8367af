"""Achievable matmul FLOP/s and copy bandwidth of this machine, measured once and cached, for devices
the data-sheet table does not know (the CPU, unknown GPUs), so that every trace has a roofline.

Measured with torch.utils.benchmark (which synchronises CUDA), the fastest of its timed blocks: a
square matmul (2·n³ FLOP) per precision and a tensor copy (read + write: 2 × its bytes), RUNS times
with the best of each kept (a moment of contention lowers one run, not the best). A measurement taken
while the machine is loaded (load average over LOADED of its cores, before or after) carries a note,
and its cache entry is used only while the machine stays loaded: the first profile on a quiet machine
measures again. Cached as JSON in ``$TB_ATTN_CACHE_DIR/peaks/``
(default ``~/.cache/tb-attn/peaks/``), keyed by host, CPU model, device name, thread count and torch
version; never in a logdir. ``python -m tb_attn_plugin.collector.peaks --device cpu --out FILE``
measures afresh (the command a report gives when a rate is above the roof); ``tb-attn report --roof
FILE`` reads an old trace against it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import socket
import sys
import time
from typing import Any

import torch
from torch.utils import benchmark

log = logging.getLogger(__name__)
FORMAT = 1
MATMUL_N = {"cpu": 1024, "cuda": 4096}
COPY_BYTES = {"cpu": 64 << 20, "cuda": 1 << 30}
MIN_RUN_S = 0.1
RUNS = 3
SLOW_S = 0.25
LOADED = 0.5  # load average per core above which other work competes with the measurement
_memo: dict[str, dict[str, Any]] = {}


def cache_dir() -> str:
    base = os.environ.get("TB_ATTN_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "tb-attn")
    return os.path.join(base, "peaks")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def _key(device: torch.device) -> str:
    parts = [socket.gethostname(), cpu_model(), device.type, device_label(device), str(torch.get_num_threads()),
             torch.__version__, str(FORMAT)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _seconds(stmt: str, glob: dict[str, Any], threads: int) -> float:
    m = benchmark.Timer(stmt=stmt, globals=glob, num_threads=threads).blocked_autorange(min_run_time=MIN_RUN_S)
    return float(min(m.times))  # the fastest block: achievable when nothing else competes for the machine


def load_note() -> str | None:
    """Why a measurement now would be low: the machine's 1-minute load average against its cores; None
    when quiet (or where the load average is not known)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    cores = os.cpu_count() or 1
    if load <= LOADED * cores:
        return None
    return (f"measured while the load average was {load:.1f} on {cores} cores: other work competed, so the rates "
            "may be low; measured again once the machine is quiet")


def measure(device: torch.device, runs: int = RUNS) -> dict[str, Any]:
    """Measure now (about a second a run): the best of ``runs`` runs of matmul TFLOP/s per precision and copy TB/s."""
    best: dict[str, Any] | None = None
    note = load_note()
    for _ in range(max(1, runs)):
        # a precision whose one matmul takes over SLOW_S (fp16 on most CPUs: seconds) is measured once:
        # its block is long enough to average contention out, and repeating it would cost minutes
        got = _measure_once(device, None if best is None else {
            p for p, t in best["tflops"].items() if t > 0 and 2.0 * MATMUL_N.get(device.type, 1024) ** 3 / (t * 1e12) < SLOW_S})
        if best is None:
            best = got
            continue
        best["bandwidth_tbs"] = max(best["bandwidth_tbs"], got["bandwidth_tbs"])
        for prec, v in got["tflops"].items():
            best["tflops"][prec] = max(best["tflops"].get(prec, 0.0), v)
    assert best is not None
    note = note or load_note()
    best["runs"] = max(1, runs)
    best["method"] = f"best of {best['runs']} runs of " + best["method"]
    best["remeasure"] = f"python -m tb_attn_plugin.collector.peaks --device {device.type} --out roof-{device.type}.json"
    if note:
        best["note"] = note
    return best


def _measure_once(device: torch.device, only: set[str] | None = None) -> dict[str, Any]:
    """One measurement of every precision (or those in ``only``) and of the copy."""
    threads = torch.get_num_threads()
    n = MATMUL_N.get(device.type, 1024)
    tflops: dict[str, float] = {}
    for prec, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
        if only is not None and prec not in only:
            continue
        try:
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            s = _seconds("torch.mm(a, b)", {"torch": torch, "a": a, "b": b}, threads)
            tflops[prec] = round(2.0 * n ** 3 / s / 1e12, 6)
        except RuntimeError as e:  # a precision without a matmul kernel here
            log.info("tb_attn: no %s matmul on %s: %s", prec, device, e)
    nbytes = COPY_BYTES.get(device.type, 64 << 20)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    s = _seconds("dst.copy_(src)", {"src": src, "dst": dst}, threads)
    return {
        "kind": "measured",
        "tflops": tflops,
        "bandwidth_tbs": round(2.0 * nbytes / s / 1e12, 6),
        "device": device_label(device),
        "device_type": device.type,
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "threads": threads,
        "torch": torch.__version__,
        "method": f"torch.utils.benchmark, fastest block: torch.mm of {n}x{n} (2n^3 FLOP); copy_ of {nbytes >> 20} MiB "
                  "(read + write)",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "source": f"measured on {socket.gethostname()} ({device_label(device)})",
    }


def measured_peaks(device: torch.device | str = "cpu") -> dict[str, Any] | None:
    """The cached measurement for this machine and device, measuring it the first time. None if it
    cannot be measured (never raises: profiling must go on)."""
    device = torch.device(device)
    try:
        key = _key(device)
    except Exception as e:  # noqa: BLE001 - e.g. CUDA not initialisable
        log.warning("tb_attn: cannot identify the device for peak measurement: %s", e)
        return None
    path = os.path.join(cache_dir(), f"{key}.json")
    if path in _memo:  # per cache file: a process that changes TB_ATTN_CACHE_DIR measures (or reads) again
        return _memo[path]
    try:
        with open(path, encoding="utf-8") as f:
            got = json.load(f)
        # one taken under load is kept only while the machine is still loaded: quiet now, measure again
        if isinstance(got, dict) and got.get("kind") == "measured" and isinstance(got.get("tflops"), dict) \
                and not (got.get("note") and load_note() is None):
            _memo[path] = got
            return got
    except (OSError, ValueError):
        pass
    try:
        got = measure(device)
    except Exception as e:  # noqa: BLE001
        log.warning("tb_attn: could not measure peaks on %s: %s", device, e)
        return None
    if got.get("note"):  # a loaded machine: flagged in the trace, measured again once the machine is quiet
        log.warning("tb_attn: peaks of %s %s", device, got["note"])
    _save(path, got)
    return got


def _save(path: str, got: dict[str, Any]) -> None:
    _memo[path] = got
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(got, f)
        os.replace(tmp, path)
    except OSError as e:
        log.info("tb_attn: peak measurement not cached (%s): %s", path, e)


def forget(device: torch.device | str = "cpu") -> None:
    """Drop the cached measurement (a report found a rate above it): the next profile measures again."""
    device = torch.device(device)
    try:
        path = os.path.join(cache_dir(), f"{_key(device)}.json")
    except Exception:  # noqa: BLE001
        return
    _memo.pop(path, None)
    try:
        os.unlink(path)
    except OSError:
        pass


def needs_measurement(device: torch.device | str) -> bool:
    """True for the CPU and for GPUs the data-sheet table does not know."""
    device = torch.device(device)
    if device.type != "cuda":
        return True
    from ..roofline.devices import by_name

    try:
        return by_name(torch.cuda.get_device_name(device)) is None
    except Exception:  # noqa: BLE001
        return True


def main(argv: list[str] | None = None) -> int:
    """Measure this machine's roof afresh (replacing the cache) and print it or write it to --out."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tb_attn_plugin.collector.peaks",
                                 description="measure matmul FLOP/s and copy bandwidth now; the file --out writes is "
                                             "what 'tb-attn report --roof FILE' and TB_ATTN_ROOF read")
    ap.add_argument("--device", default="cpu", help="torch device to measure (cpu, cuda, cuda:1); default cpu")
    ap.add_argument("--out", metavar="FILE", help="write the measurement here as JSON (default: print it)")
    ap.add_argument("--runs", type=int, default=RUNS, help=f"measurements to take, the best kept (default {RUNS})")
    args = ap.parse_args(argv)
    try:
        device = torch.device(args.device)
    except (RuntimeError, ValueError) as e:
        ap.error(f"--device {args.device!r}: {e}")
    forget(device)
    got = measure(device, max(1, args.runs))
    text = json.dumps(got, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    if got.get("note"):
        print(f"note: {got['note']}", file=sys.stderr)
    _save(os.path.join(cache_dir(), f"{_key(device)}.json"), got)  # the collector's next profile uses it
    return 0


if __name__ == "__main__":
    sys.exit(main())
