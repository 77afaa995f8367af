"""Build a large trace from a real one by replicating its events N times, as N profiler steps.

Every copy is shifted past the previous one in time and gets fresh correlation, External id and
flow ids, so linking and step separation see N distinct steps, not N overlapping copies.

    python bench/make_trace.py ../shared/traces/tl_h100_bert_small_sdpa_flash.json.gz 128 out.json
"""

from __future__ import annotations

import gzip
import sys

import orjson

ID_ARGS = ("correlation", "External id")


def replicate(src: str, copies: int, out: str) -> int:
    raw = open(src, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = (t1 - t0) + 1000.0
    id_step = 1 + max([e.get("args", {}).get(k, 0) for e in events for k in ID_ARGS
                       if isinstance(e.get("args", {}).get(k, 0), int)] +
                      [e["id"] for e in events if isinstance(e.get("id"), int)] + [0])
    with open(out, "wb") as fh:
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        fh.write(orjson.dumps(head)[:-1] + b', "traceEvents": [\n')
        first = True
        for c in range(copies):
            dt, di = c * span, c * id_step
            for e in events:
                if e.get("ph") == "M" and c:
                    continue
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + dt
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + di
                args = e2.get("args")
                if isinstance(args, dict):
                    args = dict(args)
                    for k in ID_ARGS:
                        if isinstance(args.get(k), int):
                            args[k] += di
                    e2["args"] = args
                if isinstance(e2.get("name"), str) and e2["name"].startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{c}"
                fh.write((b"" if first else b",\n") + orjson.dumps(e2))
                first = False
        fh.write(b"\n]}\n")
    return copies * len(events)


if __name__ == "__main__":
    n = replicate(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    print(f"wrote {sys.argv[3]}: {n} events")
