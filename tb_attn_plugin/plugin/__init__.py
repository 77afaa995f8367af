"""The TensorBoard plugin: loader (import-light entry point), layout (finding runs), cache, pool
(analysis in worker processes), index (the state of every trace file) and plugin (HTTP routes).

Nothing here is imported by the engine; importing this package itself imports nothing heavy."""
