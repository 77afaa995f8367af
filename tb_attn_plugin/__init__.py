"""tb-attn: attention, made visible in PyTorch profiler traces.

``tb_attn_plugin.profile`` (and ``attention_region``, ``stage``) load the collector, and torch, on
first use only: importing this package stays light for the engine, the CLI and the plugin.
``tb_attn_plugin.sweep(logdir, ...)`` (tb_attn_plugin/sweeps/) is loaded the same way.
"""

_COLLECTOR = ("profile", "attention_region", "stage")


def __getattr__(name):
    if name in _COLLECTOR:
        import importlib

        # The collector's own lazy lookup, which also rebinds its ``profile`` name to the class.
        return importlib.import_module(".collector", __name__).__getattr__(name)
    if name == "sweep":
        from .sweeps import sweep

        return sweep
    raise AttributeError(f"module 'tb_attn_plugin' has no attribute {name!r}")
