"""The TensorBoard plugin: loader (import-light entry point), layout (finding runs), cache, pool
(analysis in worker processes; dask_pool on a Dask cluster), index (the state of every trace file),
ranks_route (/ranks) and plugin (HTTP routes).

Nothing here is imported by the engine; importing this package itself imports nothing heavy."""
