"""trace/launch_config.py's columns equal its per-value rules (count, threads, the estimate's range)
however a trace mixes its values: CUPTI's plain ints, a memcpy's or memset's missing members (None),
and the mistyped values an untrusted trace may hold (bools, floats, strings, huge ints, short blocks).
The mixes lean on ints and None, the case numpy converts whole, so that both paths are exercised."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_attn_plugin.trace import launch_config
from tb_attn_plugin.trace.events import LaunchConfig

_plain = st.one_of(st.none(), st.sampled_from([0, 1, 32, 255, 1024, 49152, 2**31 - 1]))
_odd = st.sampled_from([-1, 2**31, 2**63, 2**70, True, False, 12.5, 1e300, "32", [32]])
_value = st.one_of(_plain, _plain, _plain, _odd)
_side = st.one_of(st.sampled_from([1, 2, 128, 1024, 2**19]), st.sampled_from([0, 2**20, 2**40, True, 4.0, "4"]))
_block = st.one_of(st.none(), st.lists(_side, min_size=3, max_size=3), st.lists(_side, min_size=3, max_size=3),
                   st.lists(_side, max_size=4), _odd)
_estimate = st.one_of(st.none(), st.sampled_from([0, 12, 100, 0.0, 37.5, 100.0]),
                      st.sampled_from([-0.5, 100.5, 2**1100, True, "50", float("nan"), float("inf")]))


def _estimate_rule(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 100 else math.nan


@settings(max_examples=300, deadline=None)
@given(st.lists(_value, max_size=30))
def test_counts_follow_count(values):
    want = [-1 if launch_config.count(v) is None else launch_config.count(v) for v in values]
    got = launch_config.counts(values)
    assert got.dtype == np.int64 and got.tolist() == want


@settings(max_examples=300, deadline=None)
@given(st.lists(_block, max_size=30))
def test_thread_counts_follow_threads(blocks):
    want = [launch_config.threads(b) or 0 for b in blocks]
    assert launch_config.thread_counts(blocks).tolist() == want


@settings(max_examples=300, deadline=None)
@given(st.lists(_estimate, max_size=30))
def test_estimates_keep_the_range(values):
    want = [_estimate_rule(v) for v in values]
    got = launch_config.estimates(values).tolist()
    assert len(got) == len(want)
    assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want))


_grid_side = st.one_of(st.sampled_from([1, 16, 132, 65535, 2**31 - 1]), st.sampled_from([0, -3, 2**31, True, 4.0, "4"]))
_grid = st.one_of(st.none(), st.lists(_grid_side, min_size=3, max_size=3), st.lists(_grid_side, max_size=4), _odd)


@settings(max_examples=300, deadline=None)
@given(st.lists(_grid, max_size=30))
def test_grid_sizes_follow_threads_as_floats(grids):
    """A grid is read by the block's rule (one to three counts, none zero), as a float: its product can pass int64."""
    want = [math.nan if launch_config.threads(g) is None else float(launch_config.threads(g)) for g in grids]
    got = launch_config.grid_sizes(grids).tolist()
    assert len(got) == len(want)
    assert all((math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12) for a, b in zip(got, want))


def test_a_memcpy_beside_kernels_keeps_the_kernels_configuration():
    # A real H100 launch, as CUPTI wrote it in ../shared/traces/tl_h100_bert_small_sdpa_flash.json.gz
    # (pytorch_flash::flash_fwd_kernel: 255 registers, 49152 B shared, block [128, 1, 1], est. 1 %),
    # beside a "Memcpy DtoH (Device -> Pinned)" from the same trace, whose args have none of them.
    cols = launch_config.of([LaunchConfig(registers=255, shared_memory=49152, block=[128, 1, 1], achieved_occupancy=1),
                             LaunchConfig(), None])
    assert cols.has_args.tolist() == [True, True, False]
    assert cols.registers.tolist() == [255, -1, -1]
    assert cols.shared_memory.tolist() == [49152, -1, -1]
    assert cols.threads.tolist() == [128, 0, 0]
    assert cols.occupancy[0] == 1.0 and np.isnan(cols.occupancy[1:]).all()

