"""Trainer backends behind one interface (trainers.base.PolicyTrainer): `torch` (default) and `megatron` (the extra).

The megatron backend runs in-process for one process (MegatronTrainer) and as a torchrun job driven from the
trainer pool (MegatronJobTrainer) when its layout has more than one process.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openclaw_rl.settings import MegatronSettings

BACKENDS = {
    "torch": ("trainers.torch_trainer", "TorchTrainer"),
    "megatron": ("trainers.megatron_trainer", "MegatronTrainer"),
}


def backend_missing(name: str) -> str | None:
    """Why a backend cannot run here, or None."""
    if name == "megatron" and importlib.util.find_spec("megatron") is None:
        return "training.backend=megatron needs megatron-core: pip install 'openclaw-rl[megatron]'"
    return None


def backend_class(name: str, megatron: MegatronSettings | None = None):
    """The backend's trainer class. `megatron`: the megatron layout (training.megatron); with more than one process
    the class drives a torchrun job of that layout."""
    why = backend_missing(name)
    if why:
        raise RuntimeError(why)
    if name == "megatron" and megatron is not None and megatron.nproc_per_node * megatron.nnodes > 1:
        from trainers.megatron_job_client import MegatronJobTrainer

        return MegatronJobTrainer.for_layout(megatron)
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)
