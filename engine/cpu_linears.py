"""The served model's linear layers on a CPU: oneDNN with each weight packed once per weight version.

A plain `nn.Linear` on a CPU hands a few rows to a BLAS kernel that is slow for them: on this machine [4, 1024] x
[1024, 3072] took 1.0 ms against 0.24 ms for one row, and the tiny model's 150k-entry output layer took as long for 4
rows as for 16, which is what kept batching's gain low. oneDNN with the weight reordered once into its blocked
layout (the op PyTorch's own compiler uses for frozen linears) gives the same numbers 2-10x faster at 2-16 rows;
one row stays on the default kernel (a matrix-vector product: in the engine the packed one was slower there).
The packed copy is keyed on the weight tensor's storage and version counter, so an in-place weight update
(`update_weights_*`) repacks it on the next forward. It doubles the memory of the linear weights
(`engine.cpu_packed_linears: false` keeps one copy, at the plain kernels' speed).

With autograd on, another dtype, another device, or a torch build without these ops, a layer runs its usual forward.
"""

from __future__ import annotations

import weakref

import structlog
import torch
import torch.nn.functional as F

log = structlog.get_logger()

MIN_PACKED_WEIGHTS = 1 << 17
"""Smaller layers stay plain: the oneDNN call costs ~15 us however small the layer, a plain 64 x 192 one 4-8 us (a
256 x 768 layer breaks even at one row and is twice as fast at four)."""

_BROKEN: list[str] = []
"""Set once the ops failed in this process (a build without them): every layer goes back to its plain forward."""


def pack_linears(model: torch.nn.Module) -> int:
    """Route every float32 CPU `nn.Linear` of `model` with at least `MIN_PACKED_WEIGHTS` weights through its packed
    weight; returns how many."""
    if not torch.backends.mkldnn.is_available():
        return 0
    count = 0
    for module in model.modules():
        if (
            type(module) is torch.nn.Linear
            and module.weight.device.type == "cpu"
            and module.weight.dtype == torch.float32
            and module.weight.numel() >= MIN_PACKED_WEIGHTS
        ):
            module.forward = _packed_forward(weakref.ref(module))  # an instance attribute: nn.Module calls it
            count += 1
    return count


def _packed_forward(ref: weakref.ref):
    def forward(x: torch.Tensor) -> torch.Tensor:
        layer = ref()
        if (
            _BROKEN
            or torch.is_grad_enabled()
            or x.dtype != torch.float32
            or layer.weight.device.type != "cpu"
            or x.numel() == x.shape[-1]  # one row: a matrix-vector product, which the default kernel does well
        ):
            return F.linear(x, layer.weight, layer.bias)
        try:
            flat = x.reshape(-1, x.shape[-1]).contiguous()
            out = torch.ops.mkldnn._linear_pointwise(flat, _packed(layer), layer.bias, "none", [], "")
        except (AttributeError, NotImplementedError) as exc:  # an op this build lacks: plain kernels from now on
            _BROKEN.append(str(exc)[:200])
            log.warning("oneDNN linears unavailable; using the plain kernels", error=_BROKEN[0])
            return F.linear(x, layer.weight, layer.bias)
        except RuntimeError as exc:  # this input refused (or memory short): this call only
            log.warning("oneDNN linear failed; this call uses the plain kernel", error=str(exc)[:200])
            return F.linear(x, layer.weight, layer.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])

    return forward


def forget_packed(model: torch.nn.Module) -> None:
    """Drop the packed copies: a weight written without bumping its version counter (through `.data`, `set_`) would
    otherwise keep serving the old packed one."""
    for module in model.modules():
        module.__dict__.pop("_onednn_packed", None)


def _packed(layer: torch.nn.Linear) -> torch.Tensor:
    w = layer.weight
    key = (w.data_ptr(), w._version, tuple(w.shape))
    held = layer.__dict__.get("_onednn_packed")
    if held is None or held[0] != key:
        held = (key, torch.ops.mkldnn._reorder_linear_weight(w.detach(), None))
        layer.__dict__["_onednn_packed"] = held  # not a buffer: never in the state dict
    return held[1]
