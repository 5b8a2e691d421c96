"""Trainer backends behind one interface (trainers.base.PolicyTrainer): `torch` (default) and `megatron` (the extra)."""

from __future__ import annotations

import importlib.util

BACKENDS = {
    "torch": ("trainers.torch_trainer", "TorchTrainer"),
    "megatron": ("trainers.megatron_trainer", "MegatronTrainer"),
}


def backend_missing(name: str) -> str | None:
    """Why a backend cannot run here, or None."""
    if name == "megatron" and importlib.util.find_spec("megatron") is None:
        return "training.backend=megatron needs megatron-core: pip install 'openclaw-rl[megatron]'"
    return None


def backend_class(name: str):
    import importlib

    why = backend_missing(name)
    if why:
        raise RuntimeError(why)
    module, cls = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)
