"""The collector: ``tb_attn_plugin.collector.profile`` wraps torch.profiler and tags attention.

The tag format it writes lives in ``tb_attn_plugin.format.tags``, which the engine reads without torch.
"""


def __getattr__(name):
    if name in ("profile", "attention_region", "stage"):
        import importlib

        mod = importlib.import_module(f"{__name__}.profile")
        # Importing the submodule bound ``profile`` here to the module; users mean the class.
        for attr in ("profile", "attention_region", "stage"):
            globals()[attr] = getattr(mod, attr)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
