"""One version for the package and one for the engine's output, kept apart on purpose:
the report cache is keyed by ENGINE_VERSION, so bump it whenever analysis results change."""

__version__ = "0.1.0"
ENGINE_VERSION = "16"  # 16: sampled calls carry kernels' correlation ids (ops' ts on CPU traces); 15: host.cpu_only (a CPU trace's host reading); 14: the report's overview (attention in its step, serving phases)
SCHEMA_VERSION = 2
