#!/usr/bin/env bash
# The C op-column helpers (tb_attn_plugin/trace/_nest.c, _kept.c) under AddressSanitizer
# and UBSan: instrumented copies built in a temporary directory get the op columns of a real trace,
# then random columns, rows and thread tables, in range and out of it (those must raise, not read
# out of bounds). Not part of CI (it needs a debug build); run by hand after changing them:
#   bash scripts/asan_columns.sh [N=3000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-3000}
source scripts/asan_build.sh
asan_build tb_attn_plugin/trace/_nest.c _nest
asan_build tb_attn_plugin/trace/_kept.c _kept
asan_python - "$TMP" "$N" <<'PYEOF'
import random, sys
from array import array
sys.path.insert(0, sys.argv[1])
import _kept, _nest
from tb_attn_plugin.trace import stream
ev, _ = stream.decode_file("../shared/traces/tl_h100_owlv2_eager_bmm_softmax.json.gz")
(oth, okeys, ots, odur), (lth, lkeys, lts, _) = _kept.columns(ev.ops), _kept.columns(ev.launches)
keys = list(dict.fromkeys(okeys + lkeys))
got = _nest.nest_all(oth, ots, odur, len(keys), lth, lts, array("q", [keys.index(k) for k in okeys]),
                     array("q", [keys.index(k) for k in lkeys]))
order = array("q", got[0])
assert sorted(order) == list(range(len(ev.ops)))
seq = _kept.arg_values(ev.ops, "seq")
# the columns gathered chunk by chunk (events._Kept), on the same trace
index, kk, th = {}, [], array("q")
for a in range(0, len(ev.ops), 997):
    th.frombytes(_kept.columns(ev.ops[a:a + 997], index, kk)[0])
    assert _kept.arg_values(ev.ops[a:a + 997], "seq", a)[0] == [i for i in seq[0] if a <= i < a + 997]
assert kk == okeys and th == array("q", oth)
print(f"real trace: {len(ev.ops)} ops on {len(keys)} threads, {len(seq[0])} with a seq")
rnd, raised = random.Random(5), 0
for i in range(int(sys.argv[2])):
    n, m, nth = rnd.randint(0, 40 if i % 7 else 300), rnd.randint(0, 20), rnd.randint(0, 4)  # 300: merged runs
    th = array("q", [rnd.randint(-1, nth) for _ in range(n)])
    lt = array("q", [rnd.randint(-1, nth) for _ in range(m)])
    ts = array("d", [rnd.choice([0.0, 1.0, 2.5, float("nan")]) for _ in range(n)])
    du = array("d", [rnd.choice([0.0, 1.0, 3.0]) for _ in range(n)])
    lts = array("d", [rnd.choice([0.0, 1.5]) for _ in range(m)])
    rank = () if i % 2 else (array("q", [rnd.randint(-1, nth) for _ in range(rnd.randint(0, 3))]),
                             array("q", [rnd.randint(-1, nth) for _ in range(rnd.randint(0, 3))]))
    flags = (bytes(rnd.randint(0, 1) for _ in range(max(0, n + rnd.choice([0, 0, 1, -1])))),
             (list(range(max(0, n + rnd.choice([0, 0, -1])))),)) if rank else ()
    if flags and i % 5 == 0:  # the columns written into arrays of the caller's (some of the wrong length)
        k = max(0, n + rnd.choice([0, 0, 0, -1]))
        flags += ((array("q", [0]) * k,) * 4 + (array("d", [0.0]) * k,) * 3 + (array("q", [0]) * k, array("q", [0]) * m),)
    try:
        _nest.nest_all(th, ts, du, nth, lt, lts, *rank, *flags)
    except (ValueError, TypeError):
        raised += 1
    for call in (lambda: _kept.columns(ev.ops[:n], {}, []), lambda: _kept.arg_values(ev.ops[:n], "seq", m)):
        try:
            call()
        except (IndexError, ValueError, TypeError):
            raised += 1
print(f"{sys.argv[2]} random cases: no memory error ({raised} refused: out of range, mismatched or mistyped)")
PYEOF
