"""Who wrote a trace: worker name (host, and rank under torch.distributed/torchrun) and run metadata."""

from __future__ import annotations

import os
import re
import socket
from typing import Any

import torch


def rank_and_world() -> tuple[int | None, int | None]:
    """(rank, world size) from an initialised process group, else from torchrun's environment."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        try:
            return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        except ValueError:
            pass
    return None, None


def worker_name() -> str:
    """``{host}_rank{r}`` under distributed runs, else ``{host}_{pid}`` as tensorboard_trace_handler does.
    The host keeps only characters that are safe in a file name."""
    host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname()) or "host"
    rank, _ = rank_and_world()
    return f"{host}_rank{rank}" if rank is not None else f"{host}_{os.getpid()}"


def device_of(model: torch.nn.Module | None) -> str:
    if model is not None:
        for p in model.parameters():
            return str(p.device)
    return "cuda" if torch.cuda.is_available() else "cpu"


def metadata(variant: str | None, model: torch.nn.Module | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    rank, world = rank_and_world()
    dev = device_of(model)
    out: dict[str, Any] = {"torch": torch.__version__, "device": dev, "host": socket.gethostname(), "rank": rank,
                           "world_size": world}
    if dev.startswith("cuda") and torch.cuda.is_available():
        out["device_name"] = torch.cuda.get_device_name(torch.device(dev))
    if model is not None:
        out["model"] = type(getattr(model, "_orig_mod", model)).__name__
    out.update(extra or {})
    out["variant"] = variant
    return out
