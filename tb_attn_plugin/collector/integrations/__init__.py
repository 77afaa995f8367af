"""Callbacks that drive the collector from a training loop: Hugging Face (``hf.TbAttnCallback``) and
Lightning (``lightning.TbAttnLightningCallback``). Each imports its framework only when used."""
