"""Lightning callback: profiles a window of training batches with the collector.

    trainer = L.Trainer(callbacks=[TbAttnLightningCallback("runs/my-model")])

Works with ``lightning`` (2.x) or ``pytorch_lightning``, whichever is installed.
"""

from __future__ import annotations

from typing import Any

import torch

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from ..profile import profile


class TbAttnLightningCallback(Callback):
    def __init__(self, logdir: str, *, wait: int = 1, warmup: int = 1, active: int = 2, repeat: int = 1,
                 variant: str | None = None, **profile_kwargs: Any):
        self.logdir, self.variant, self.kwargs = logdir, variant, profile_kwargs
        self.schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
        self.prof: profile | None = None

    def on_train_start(self, trainer, pl_module):
        self.prof = profile(self.logdir, model=pl_module, variant=self.variant, schedule=self.schedule, **self.kwargs)
        self.prof.__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.prof is not None:
            self.prof.step()

    def on_train_end(self, trainer, pl_module):
        if self.prof is not None:
            self.prof.__exit__(None, None, None)
            self.prof = None
