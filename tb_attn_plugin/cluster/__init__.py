"""Running per-trace analyses on a Dask cluster (``tb-attn report --dask``, TB_ATTN_DASK_SCHEDULER)."""
