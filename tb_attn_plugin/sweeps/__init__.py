"""Controlled experiments over attention backends × sequence length × batch (``tb-attn sweep``).

``grid``, ``flops``, ``store`` and ``analysis`` need no torch (the plugin reads sweeps with them);
``backends``, ``measure``, ``limits`` and ``runner`` import torch when a sweep runs.
"""


def sweep(logdir, **kwargs):
    """Run a sweep into ``logdir`` (see ``tb_attn_plugin.sweep.runner.run_sweep`` for the options);
    returns every cell's record, those measured before included."""
    from .runner import run_sweep

    return run_sweep(logdir, **kwargs)
