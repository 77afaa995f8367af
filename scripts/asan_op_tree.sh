#!/usr/bin/env bash
# The op tree's stack pass (nest_sorted in tb_attn_plugin/trace/_scanner.c) under AddressSanitizer
# and UBSan: an instrumented copy built in a temporary directory gets the op columns of a real
# trace, then random columns, offsets and thread tables, in range and out of it (those must raise,
# not read out of bounds). CI runs it short (tests/test_sanitizers.py, 400 cases); the long run is
# by hand after changing the pass:
#   bash scripts/asan_op_tree.sh [N=3000]   (TRACE=a trace file; default the OWLv2 trace in
#                                            TB_ATTN_SHARED_TRACES, else ../shared/traces)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-3000}
source scripts/asan_build.sh
asan_build tb_attn_plugin/trace/_scanner.c _scanner
TRACE=${TRACE:-${TB_ATTN_SHARED_TRACES:-../shared/traces}/tl_h100_owlv2_eager_bmm_softmax.json.gz}
asan_python - "$TMP" "$N" "$TRACE" <<'PYEOF'
import random, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import _scanner
from tb_attn_plugin.trace import link, native, stream
native.nest_sorted = _scanner.nest_sorted  # the instrumented pass builds the tree below
ev, _ = stream.decode_file(sys.argv[3])
tree = link.op_tree(ev)
assert sorted(tree.order) == list(range(len(ev.op_table)))
print(f"real trace: {len(ev.op_table)} ops on {len(tree.threads)} threads, {int(tree.seq.sum())} with a seq")
rnd, raised = random.Random(5), 0
for i in range(int(sys.argv[2])):
    n, m, nth = rnd.randint(0, 40 if i % 7 else 300), rnd.randint(0, 20), rnd.randint(0, 4)
    ts = np.array([rnd.choice([0.0, 1.0, 2.5, float("nan")]) for _ in range(n)])
    bad = rnd.random() < 0.3  # then one length or offset does not fit
    du = np.array([rnd.choice([0.0, 1.0, 3.0]) for _ in range(n - (bad and rnd.random() < 0.3 and n > 0))])
    lts = np.array([rnd.choice([0.0, 1.5]) for _ in range(m)], np.float64)
    def offsets(total):  # nth + 1 thread offsets, now and then out of order or off the end
        at = sorted(rnd.randint(0, total) for _ in range(max(nth - 1, 0)))
        at = [0] + at + [total + (rnd.choice([1, -1]) if bad and rnd.random() < 0.3 else 0)]
        if bad and rnd.random() < 0.2:
            rnd.shuffle(at)
        return np.array(at, np.int64)
    out = [np.zeros(max(0, n + (rnd.choice([1, -1]) if bad and rnd.random() < 0.2 else 0)), np.int64) for _ in range(3)]
    try:
        _scanner.nest_sorted(ts.astype(np.float64), du.astype(np.float64), offsets(n), lts, offsets(m), *out,
                               np.zeros(m, np.int64))
    except (ValueError, TypeError):
        raised += 1
print(f"{sys.argv[2]} random cases: no memory error ({raised} refused: out of range, mismatched or mistyped)")
PYEOF
