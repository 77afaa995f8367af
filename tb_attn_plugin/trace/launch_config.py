"""Kernels' launch configurations as columns: registers per thread, shared memory, threads per block
and CUPTI's est. achieved occupancy %, read from each kernel's args while the trace is decoded (as
objects they were ~3.5 MB of a 130 MB trace's peak). The values are untrusted: a count is an int
(or a float, truncated) in [0, 2**31), never a bool; a block is a list of one to three counts, none
zero; an estimate a number in [0, 100]. Anything else reads as unknown (-1, 0 or NaN), and numpy
does the work wherever the values are plain ints, as CUPTI writes them.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, NamedTuple

import numpy as np

LIMIT = 1 << 31  # a count at or past this is not a real register, byte or thread count
_FAST_BLOCK = 1 << 20  # block sides below this multiply exactly in int64 (CUDA's are at most 1024)
# The types numpy converts whole (exactly these: a bool is an int subclass but its own type here).
_INT_OR_NONE = {int, type(None)}
_LIST_OR_NONE = {list, type(None)}
_NUMBER_OR_NONE = {int, float, type(None)}


class LaunchColumns(NamedTuple):
    """One row per GPU activity, in file order."""

    has_args: np.ndarray  # bool: its event has an args object (memcpy and memset have one too)
    registers: np.ndarray  # int64 per thread, -1 unknown
    shared_memory: np.ndarray  # int64 bytes, -1 unknown
    threads: np.ndarray  # per block, 0 unknown (int64; objects where a product passes int64)
    occupancy: np.ndarray  # float64 %, NaN unknown
    grid_z: np.ndarray  # int64 blocks along the grid's z (a batched GEMM's batch), 0 unknown
    grid: np.ndarray  # float64 blocks per launch (a product of up to 2**31 x 65535 x 65535: float), NaN unknown

    def __len__(self) -> int:
        return len(self.has_args)


def of(configs: list) -> LaunchColumns:
    """The columns of ``configs``: each activity's events.LaunchConfig (or Args, which has the same
    members), None where its event has no args."""
    has = [c is not None for c in configs]
    at = [c for c in configs if c is not None]
    cols = (counts([c.registers for c in at]), counts([c.shared_memory for c in at]),
            thread_counts([c.block for c in at]), estimates([c.achieved_occupancy for c in at]),
            grid_z([c.grid for c in at]), grid_sizes([c.grid for c in at]))
    if len(at) == len(configs):
        return LaunchColumns(np.ones(len(configs), bool), *cols)
    mask = np.array(has, bool)
    out = []
    for col, none in zip(cols, (-1, -1, 0, np.nan, 0, np.nan)):
        full = np.full(len(configs), none, col.dtype)
        full[mask] = col
        out.append(full)
    return LaunchColumns(mask, *out)


def joined(parts: list[LaunchColumns]) -> LaunchColumns:
    if not parts:
        return of([])
    if len(parts) == 1:
        return parts[0]
    return LaunchColumns(*(np.concatenate(cols) for cols in zip(*parts)))


def count(v: Any) -> int | None:
    if type(v) is int:  # as the profiler writes them
        return v if 0 <= v < LIMIT else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < LIMIT else None


def threads(block: Any) -> int | None:
    if not isinstance(block, list) or not block or len(block) > 3:
        return None
    n = 1
    for x in block:
        x = count(x)
        if not x:
            return None
        n *= x
    return n


def counts(values: list) -> np.ndarray:
    """count() of each value as int64, -1 for None."""
    if set(map(type, values)) <= _INT_OR_NONE:  # as CUPTI writes them; a memcpy's args have none
        try:
            got = np.array([-1 if v is None else v for v in values], np.int64).reshape(len(values))
        except OverflowError:  # past int64: the loop below says None
            pass
        else:
            got[(got < 0) | (got >= LIMIT)] = -1
            return got
    return np.array([-1 if c is None else c for c in map(count, values)], np.int64).reshape(len(values))


def grid_z(grids: list) -> np.ndarray:
    """The z extent of each grid ([x, y, z] as CUPTI writes it) as int64, 0 where unknown."""
    return np.array([g[2] if type(g) is list and len(g) == 3 and type(g[2]) is int and 0 < g[2] < LIMIT else 0
                     for g in grids], np.int64).reshape(len(grids))


def thread_counts(blocks: list) -> np.ndarray:
    """threads() of each block, 0 for None: int64, or Python ints (objects) where a product passes int64."""
    if set(map(type, blocks)) <= _LIST_OR_NONE:
        given = [b for b in blocks if b is not None]
        flat = list(chain.from_iterable(given))
        if (set(map(len, given)) <= {3} and set(map(type, flat)) <= {int} and 0 < min(flat, default=1)
                and max(flat, default=1) < _FAST_BLOCK):
            got = np.array(flat, np.int64).reshape(len(given), 3).prod(axis=1)
            if len(given) == len(blocks):
                return got
            out = np.zeros(len(blocks), np.int64)
            out[[b is not None for b in blocks]] = got
            return out
    got = [threads(b) or 0 for b in blocks]
    return np.array(got, np.int64 if max(got, default=0) < 1 << 63 else object).reshape(len(got))


def estimates(values: list) -> np.ndarray:
    """CUPTI's est. achieved occupancy % of each launch as float64, NaN where not a number in [0, 100]."""
    if set(map(type, values)) <= _NUMBER_OR_NONE:
        try:
            got = np.array([np.nan if v is None else v for v in values], np.float64).reshape(len(values))
        except OverflowError:  # an int past float: the loop below
            pass
        else:
            with np.errstate(invalid="ignore"):
                got[~((got >= 0) & (got <= 100))] = np.nan
            return got
    return np.array([float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 100 else np.nan
                     for v in values], np.float64).reshape(len(values))


def grid_sizes(grids: list) -> np.ndarray:
    """The blocks of each launch's grid as float64, NaN where the grid is not one to three counts, none zero."""
    if set(map(type, grids)) <= _LIST_OR_NONE:
        given = [g for g in grids if g is not None]
        flat = list(chain.from_iterable(given))
        if set(map(len, given)) <= {3} and set(map(type, flat)) <= {int} and 0 < min(flat, default=1) \
                and max(flat, default=1) < LIMIT:
            got = np.array(flat, np.float64).reshape(len(given), 3).prod(axis=1)
            if len(given) == len(grids):
                return got
            out = np.full(len(grids), np.nan)
            out[[g is not None for g in grids]] = got
            return out
    got = [threads(g) for g in grids]
    return np.array([np.nan if n is None else float(n) for n in got], np.float64).reshape(len(got))
