#!/usr/bin/env bash
# The C event scanner (tb_attn_plugin/trace/_scanner.c) under AddressSanitizer and UBSan: builds
# an instrumented copy in a temporary directory and feeds it a real trace whole, then N mutated and
# cut pieces of it (bytes swapped for JSON punctuation, random ranges). Any out-of-bounds read or
# write aborts with ASan's report; the records of routed chunks are read back into columns. CI runs a short one (tests/test_sanitizers.py); run the long one after
# changing the scanner:   bash scripts/asan_scanner.sh [N=20000]   (TRACE=path picks the trace)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
TRACE=${TRACE:-../shared/traces/tl_h100_owlv2_eager_bmm_softmax.json.gz}  # any .json.gz trace
source scripts/asan_build.sh
asan_build tb_attn_plugin/trace/_scanner.c _scanner
asan_python - "$TMP" "$N" "$TRACE" <<'PYEOF'
import gzip, random, sys
sys.path.insert(0, sys.argv[1])
import _scanner
from tb_attn_plugin.trace import events
rules, route = events._PREFILTER_RULES, events._ROUTE
text = gzip.decompress(open(sys.argv[3], "rb").read())
start = text.find(b"[", text.find(b'"traceEvents"'))
pos, kept, dropped = start + 1, 0, 0
while True:  # the whole array, chunk by chunk as the engine reads it
    out, d, pos, done = _scanner.scan_events(text, pos, 4 << 20, *rules)
    assert out is not None, "the real trace's event array was not understood"
    kept, dropped = kept + len(out), dropped + d
    if done:
        break
print(f"whole trace: kept {kept} of {pos - start} bytes, dropped {dropped} events")
import json
import numpy as np
from tb_attn_plugin.trace.records import JSON, REC, Table


def check_records(out):
    """Each routed list's records: whole Recs, read into columns; one per event of the GPU array, one
    per name of the ops' and launches' names, and one flagged JSON per event of their JSON arrays."""
    assert all(len(r) % _scanner.REC_SIZE == 0 for r in out[5:9]) and REC.itemsize == _scanner.REC_SIZE
    for g, (j, r) in enumerate(zip(out[:3], out[6:9])):
        recs = np.frombuffer(r, REC)
        try:
            n = len(json.loads(j))
            if g != 1:
                assert len(json.loads(out[10 if g == 0 else 11])) == len(recs)
        except ValueError:
            continue  # a mutated event the decoder refuses: the engine then reads the chunk the plain way
        assert n == (len(recs) if g == 1 else int(((recs["nulls"] & JSON) != 0).sum()))
    for r in out[5:9]:
        t = Table(REC.names, events.CATS)
        t.add_records(r)
        t.finish()
    return len(out[5]) // _scanner.REC_SIZE, len(out[6]) // _scanner.REC_SIZE


pos, records, ops = start + 1, 0, 0
while True:  # again with the route: kept events sorted into their lists with their records
    out, d, pos, done = _scanner.scan_events(text, pos, 4 << 20, *rules, False, route)
    assert isinstance(out, tuple), "the real trace's chunk was not routed"
    m, o = check_records(out)
    records, ops = records + m, ops + o
    if done:
        break
print(f"whole trace routed: {records} [memory] records, {ops} op records")
# Slimmed as the streamed reader slims: args members Args declares, no shapes for most op names.
names = {m.group(1) for m in __import__("re").finditer(rb'"name": "(aten::[a-z_]+)"', text)}
slim = (events.rules.ARG_KEYS, events.rules.SHAPE_KEYS, tuple(sorted(names - {b"aten::bmm", b"aten::linear"})))
pos, slimmed = start + 1, 0
while True:
    out, d, pos, done = _scanner.scan_events(text, pos, 4 << 20, *rules, False, route, slim)
    assert isinstance(out, tuple), "the real trace's chunk was not routed"
    slimmed += len(out[0])
    if done:
        break
print(f"whole trace slimmed: ops {slimmed} bytes, {len(slim[2])} names without shapes")
rnd, base, plain = random.Random(1), text[start:start + 200_000], 0
for i in range(int(sys.argv[2])):
    b = bytearray(base[:rnd.randint(0, len(base))] if i % 2 else base[rnd.randint(0, 5000):rnd.randint(5000, 20000)])
    for _ in range(rnd.randint(0, 5)):
        if b:
            b[rnd.randrange(len(b))] = rnd.choice(b'{}[]",\\: a')
    if i % 3 == 0:
        b += b"]"  # some pieces end their array
    pos = rnd.randint(0, len(b))
    plain += _scanner.scan_events(bytes(b), pos, rnd.choice([0, 100, 1 << 20]), *rules)[0] is not None
    # The streamed reader's call: a window that may end inside an event (partial).
    got = _scanner.scan_events(bytes(b), pos, 1 << 62, *rules, True)
    assert got[0] is None or pos <= got[2] <= len(b), got[1:]
    for partial in (False, True):  # routed, and its records read into columns
        got = _scanner.scan_events(bytes(b), pos, rnd.choice([0, 100, 1 << 62]), *rules, partial, route,
                                     slim if i % 2 else None)
        assert got[0] is None or pos <= got[2] <= len(b), got[1:]
        if isinstance(got[0], tuple):
            check_records(got[0])
print(f"{sys.argv[2]} mutated pieces: no memory error ({plain} read as plain events, the rest handed back)")
PYEOF
