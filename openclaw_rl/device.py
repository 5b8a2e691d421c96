"""The one device choice for the engine and the trainers: `auto` takes CUDA when it is visible."""

from __future__ import annotations

import torch


class DeviceUnavailable(RuntimeError):
    pass


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceUnavailable(f"device {name} was asked for but no CUDA device is visible")
    return torch.device(name)
