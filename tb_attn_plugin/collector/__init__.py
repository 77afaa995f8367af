"""The collector: ``tb_attn_plugin.collector.profile`` wraps torch.profiler and tags attention.

Only ``tags`` is imported eagerly: the analysis engine reads the tag format without torch.
"""


def __getattr__(name):
    if name in ("profile", "attention_region", "stage"):
        from . import profile as _profile_module

        return getattr(_profile_module, name)
    raise AttributeError(name)
