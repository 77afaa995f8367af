"""Which analysis pool the plugin runs on: the local process pool (pool.py) or a Dask cluster's (dask_pool.py)."""

from __future__ import annotations

import os

from .pool import AnalysisPool


def make_pool():
    """The local pool, or a Dask cluster's when TB_ATTN_DASK_SCHEDULER names one."""
    address = os.environ.get("TB_ATTN_DASK_SCHEDULER", "").strip()
    if address:
        from .dask_pool import DaskAnalysisPool  # dask is imported only when a scheduler is named

        return DaskAnalysisPool(address)
    return AnalysisPool()
