"""The roofline's GPU gaps (roofline/timing.py) from the kernel columns equal the loop they replaced:
per (call, pass), kernels sorted by (start, end), a gap where a kernel starts after every earlier one
ended, each call's idle time summed group by group in order of the groups' first kernels (so to the
bit, not only close), the gap counts and the list of gaps."""

from __future__ import annotations

from array import array
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.roofline.timing import _gpu_gaps


def _loop(kernels, call_of, node_of, kernel_call, n_calls):
    spans: dict = {}
    for i, (op, ts, dur) in enumerate(kernels):
        if op >= 0:
            c, ps = call_of[op], "bwd" if node_of[op] >= 0 else "fwd"
        else:
            c, ps = kernel_call[i], "fwd"
        if c >= 0:
            spans.setdefault((c, ps), []).append((ts, ts + dur))
    idle, gaps_n, gaps = [0.0] * n_calls, [0] * n_calls, []
    for (c, _), iv in spans.items():
        iv.sort()
        end = iv[0][1]
        for s, e in iv[1:]:
            if s - end > 0:
                idle[c] += s - end
                gaps.append(s - end)
            gaps_n[c] += 1
            end = max(end, e)
    return idle, gaps_n, gaps


_time = st.sampled_from([0.0, 0.1, 0.2, 0.3, 1.0, 1.5, 2.0, 7.25, 1e6 + 0.1, 1e6 + 0.3])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.lists(st.tuples(st.integers(-1, 5), _time, _time, st.integers(-1, 3)), max_size=40),
       st.lists(st.tuples(st.integers(-1, 3), st.booleans()), min_size=6, max_size=6))
def test_gaps_from_columns_are_the_loops(n_calls, kernels, ops):
    call_of = [min(c, n_calls - 1) for c, _ in ops]
    node_of = [0 if bwd else -1 for _, bwd in ops]
    kernel_call = [min(kc, n_calls - 1) for *_, kc in kernels]
    L = SimpleNamespace(kernel_op=array("q", [op for op, *_ in kernels]),
                        kernel_ts=np.array([ts for _, ts, _, _ in kernels], np.float64),
                        kernel_dur=array("d", [d for *_, d, _ in kernels]),
                        bwd_column=np.array(node_of) >= 0)
    got = _gpu_gaps(L, call_of, kernel_call, n_calls)
    want = _loop([(op, ts, d) for op, ts, d, _ in kernels], call_of, node_of, kernel_call, n_calls)
    assert repr(got[:2]) == repr(want[:2])  # floats to the bit, and floats (0.0), not ints, where no gap
    assert sorted(got[2]) == sorted(want[2])
