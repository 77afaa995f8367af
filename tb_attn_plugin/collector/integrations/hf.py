"""Hugging Face ``TrainerCallback``: profiles a window of training steps with the collector.

    trainer = Trainer(model=model, args=args, callbacks=[TbAttnCallback("runs/llama-sdpa")])
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback

from ..profile import profile


class TbAttnCallback(TrainerCallback):
    def __init__(self, logdir: str, *, wait: int = 1, warmup: int = 1, active: int = 2, repeat: int = 1,
                 variant: str | None = None, **profile_kwargs: Any):
        self.logdir, self.variant, self.kwargs = logdir, variant, profile_kwargs
        self.schedule = torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
        self.prof: profile | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        variant = self.variant or getattr(getattr(model, "config", None), "_attn_implementation", None)
        self.prof = profile(self.logdir, model=model, variant=variant, schedule=self.schedule, **self.kwargs)
        self.prof.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self.prof is not None:
            self.prof.step()

    def on_train_end(self, args, state, control, **kwargs):
        if self.prof is not None:
            self.prof.__exit__(None, None, None)
            self.prof = None
