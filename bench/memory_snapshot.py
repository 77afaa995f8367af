"""A synthetic CUDA memory snapshot of N trace entries, analysed the way `tb-attn report FILE.pickle`
does, in a fresh process: wall time and peak RSS against the pickle's size.

The snapshot has the documented layout (segments with blocks, one device trace, external
annotations for tagged attention calls) and what real ones hold per entry: action, addr, size,
stream, time_us and frames. As torch writes them (``_record_memory_history(context="all",
stacks="python")``), every alloc and free_requested entry has its own list of 8-20 frames, and the
frame dicts themselves are shared between entries (torch symbolizes each distinct frame once). Allocations follow a training step's pattern: activations
live across a step, score matrices allocated and freed inside each call.

    .venv/bin/python bench/memory_snapshot.py --entries 1000000 --repeat 3
    .venv/bin/python bench/memory_snapshot.py --entries 1000000 --plain   # without the C decoder
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _measure import child_code, measure  # noqa: E402

from tb_attn_plugin.format import tags  # noqa: E402


def make(n: int, seed: int = 0) -> dict:
    rnd = random.Random(seed)
    pool = [{"filename": f"/home/u/train/model_{i % 7}.py", "line": 10 + i, "name": f"fn_{i}"} for i in range(200)]

    def stack():
        return [pool[rnd.randrange(200)] for _ in range(rnd.randrange(8, 21))]
    base = 0x7F0000000000
    trace: list[dict] = []
    ann: list[dict] = []
    live: list[tuple[int, int]] = []
    t = 0
    next_addr = base
    call = 0
    B, H, L = 4, 16, 1024
    score = B * H * L * L * 2
    while len(trace) < n:
        # One attention call: a tagged span with its score matrices, surrounded by other allocations.
        t += 5
        name = tags.call_name(layer=f"model.layers.{call % 24}.self_attn", impl="eager", b=B, hq=H, hkv=H, lq=L, lk=L,
                              d=64, dtype="bfloat16", causal=True)
        call += 1
        ann.append({"name": name, "stage": "START", "device": 0, "time_us": t})
        mine = []
        for _ in range(3):
            t += 1
            trace.append({"action": "alloc", "addr": next_addr, "size": score, "stream": 0, "time_us": t,
                          "frames": stack()})
            mine.append((next_addr, score))
            next_addr += score
        for a, s in mine[:-1]:
            t += 1
            trace.append({"action": "free_requested", "addr": a, "size": s, "stream": 0, "time_us": t, "frames": stack()})
            trace.append({"action": "free_completed", "addr": a, "size": s, "stream": 0, "time_us": t, "frames": []})
        ann.append({"name": name, "stage": "END", "device": 0, "time_us": t + 1})
        live.append(mine[-1])
        for _ in range(rnd.randrange(8, 24)):
            t += 1
            if live and rnd.random() < 0.5:
                a, s = live.pop(rnd.randrange(len(live)))
                trace.append({"action": "free_requested", "addr": a, "size": s, "stream": 0, "time_us": t,
                              "frames": stack()})
                trace.append({"action": "free_completed", "addr": a, "size": s, "stream": 0, "time_us": t, "frames": []})
            else:
                s = rnd.choice((512, 4096, 1 << 20, 8 << 20))
                trace.append({"action": "alloc", "addr": next_addr, "size": s, "stream": 0, "time_us": t,
                              "frames": stack()})
                live.append((next_addr, s))
                next_addr += s
    del trace[n:]
    blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": []} for a, s in live[:1000]]
    segments = [{"device": 0, "address": base, "total_size": next_addr - base, "allocated_size": 0, "active_size": 0,
                 "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                 "is_expandable": True, "frames": [], "blocks": blocks}]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {"expandable_segments": True},
            "external_annotations": ann}


CHILD_SETUP = "from tb_attn_plugin.memory.engine import snapshot_report"
CHILD_WORK = """
r = snapshot_report(PATH)
m = r["memory"]
n = m["events"]
extra = [len(m["curve"]["t_us"]), m["score_matrix"]["blocks"], m["peak_bytes"]]
"""


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--entries", type=int, nargs="+", default=[1_000_000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--plain", action="store_true",
                   help="load with the plain unpickler, as when the C decoder is not built")
    args = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    setup = CHILD_SETUP + ("\nfrom tb_attn_plugin.memory import fast_pickle\nfast_pickle.Decoder = None"
                           if args.plain else "")
    code = child_code(setup, CHILD_WORK)
    print(f"load average at start: {os.getloadavg()[0]:.1f}; loader: "
          f"{'plain unpickler' if args.plain else 'C decoder (memory/_snapshot_decode.c)'}")
    print("| entries | pickle MB | analysis s (best) | peak RSS MB (whole process) | peak RSS / pickle | growth over imports MB | curve points | score blocks |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.entries:
            path = os.path.join(tmp, f"snap{n}.memory.pickle")
            with open(path, "wb") as f:
                pickle.dump(make(n), f, protocol=4)
            size = os.path.getsize(path)
            r = measure(sys.executable, code, path, repeat=args.repeat, env=env)
            if "error" in r:
                print(f"| {n:,} | {size / 1e6:.1f} | {r['error']} |")
                continue
            rss = r["peak_rss_mb"]
            print(f"| {n:,} | {size / 1e6:.1f} | {r['seconds']:.2f} | {rss:.0f} | {rss * 1048576 / size:.2f} | "
                  f"{r['peak_growth_mb']:.0f} | {r['extra'][0]} | {r['extra'][1]:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
