#!/usr/bin/env bash
# The C snapshot decoder (tb_attn_plugin/memory/_snapshot_decode.c) under AddressSanitizer and UBSan:
# builds an instrumented copy in a temporary directory and feeds it a real-format snapshot pickle
# (tests/memory_snapshots.py, protocols 2-5) in windows of 1-64 bytes, whole and with N mutations
# (bytes flipped, ranges cut, bytes inserted). Any out-of-bounds access or undefined behaviour aborts
# with the sanitizer's report. CI runs a short one (tests/test_sanitizers.py); run the long one after changing
# the decoder:   bash scripts/asan_snapshot_decoder.sh [N=20000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
source scripts/asan_build.sh
asan_build tb_attn_plugin/memory/_snapshot_decode.c _snapshot_decode
asan_python - "$TMP" "$N" <<'PYEOF'
import pickle, random, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, ".")
import _snapshot_decode as dec
from tests.memory_snapshots import known_snapshot

def run(raw, step):
    d = dec.Decoder(lambda fn, name: 3)
    buf = bytearray()
    for i in range(0, len(raw), step):
        buf += raw[i:i + step]
        del buf[:d.feed(buf)]
        if d.stopped:
            break
    return d.result()

base = [pickle.dumps(known_snapshot()[0], protocol=p) for p in (2, 3, 4, 5)]
for raw in base:
    for step in range(1, 65):
        assert run(raw, step)[6] == len(known_snapshot()[0]["device_traces"][0])  # n, the entries read
rnd, decoded = random.Random(1), 0
for _ in range(int(sys.argv[2])):
    raw = bytearray(rnd.choice(base))
    for _ in range(rnd.randint(1, 8)):
        k, op = rnd.randrange(len(raw)), rnd.random()
        if op < 0.6:
            raw[k] = rnd.randrange(256)
        elif op < 0.8:
            del raw[k:k + rnd.randint(1, 20)]
        else:
            raw[k:k] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 10)))
    dec.memo_scan(bytes(raw))  # the scan the plain unpickler's path runs first: any bytes, no memory error
    try:
        run(bytes(raw), rnd.randint(1, 64))
        decoded += 1
    except (dec.Unsupported, dec.Refused, MemoryError):
        pass
print(f"asan: the snapshot in every window size, then {sys.argv[2]} mutated pickles: {decoded} decoded, "
      "the rest handed back; no memory error")
PYEOF
