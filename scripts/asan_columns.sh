#!/usr/bin/env bash
# The C op-column helpers (tb_attn_plugin/trace/_nest.c, _kept.c, _columns.c) under AddressSanitizer
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
asan_build tb_attn_plugin/trace/_columns.c _columns
asan_python - "$TMP" "$N" <<'PYEOF'
import random, sys
from array import array
sys.path.insert(0, sys.argv[1])
import _columns, _kept, _nest
from tb_attn_plugin.trace import stream
ev, _ = stream.decode_file("../shared/traces/tl_h100_owlv2_eager_bmm_softmax.json.gz")
(oth, okeys, ots, odur), (lth, lkeys, lts, _) = _kept.columns(ev.ops), _kept.columns(ev.launches)
keys = list(dict.fromkeys(okeys + lkeys))
got = _nest.nest_all(oth, ots, odur, len(keys), lth, lts, array("q", [keys.index(k) for k in okeys]),
                     array("q", [keys.index(k) for k in lkeys]))
order = array("q", got[0])
assert sorted(order) == list(range(len(ev.ops)))
seq = _kept.arg_values(ev.ops, "seq")
names = [e.name for e in ev.ops]
pos = _columns.positions(names)
ids, ks = _columns.factorize(list(range(len(names))), (names,), "other")
sums = _columns.sums(list(range(len(names))), (names,), None, array("d", odur))
spans = _columns.spans(list(range(len(names))), (names,), None, array("d", ots), array("d", odur))
print(f"real trace: {len(ev.ops)} ops on {len(keys)} threads, {len(seq[0])} with a seq, {len(pos)} names")
rnd, raised = random.Random(5), 0
for i in range(int(sys.argv[2])):
    n, m, nth = rnd.randint(0, 40), rnd.randint(0, 20), rnd.randint(0, 4)
    th = array("q", [rnd.randint(-1, nth) for _ in range(n)])
    lt = array("q", [rnd.randint(-1, nth) for _ in range(m)])
    ts = array("d", [rnd.choice([0.0, 1.0, 2.5, float("nan")]) for _ in range(n)])
    du = array("d", [rnd.choice([0.0, 1.0, 3.0]) for _ in range(n)])
    lts = array("d", [rnd.choice([0.0, 1.5]) for _ in range(m)])
    rank = () if i % 2 else (array("q", [rnd.randint(-1, nth) for _ in range(rnd.randint(0, 3))]),
                             array("q", [rnd.randint(-1, nth) for _ in range(rnd.randint(0, 3))]))
    try:
        _nest.nest_all(th, ts, du, nth, lt, lts, *rank)
    except ValueError:
        raised += 1
    col = [rnd.choice(["a", None, "", 1]) for _ in range(rnd.randint(0, 30))]
    rows = [rnd.randint(-2, 32) for _ in range(rnd.randint(0, 30))]
    vals = array("d", [rnd.random() for _ in range(rnd.randint(0, 30))])
    for call in (lambda: _columns.sums(rows, (col, col), "x", vals), lambda: _columns.spans(rows, (col,), "x", vals, vals),
                 lambda: _columns.factorize(rows, (col,), "x"), lambda: _columns.positions(col)):
        try:
            call()
        except IndexError:
            raised += 1
print(f"{sys.argv[2]} random cases: no memory error ({raised} refused as out of range)")
PYEOF
