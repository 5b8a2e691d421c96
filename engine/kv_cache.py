"""A KV cache that grows in place: Hugging Face's DynamicCache appends each decoded token with torch.cat, which
copies every row's whole past keys and values on every step. With OpenClaw's 10K-token prompts and 16 rows that is
tens of MB copied per token, more than the step's own arithmetic on a CPU. Here each layer keeps a buffer with
spare room and writes new positions into it; the keys and values the model sees are views of its filled part.

When something else replaces a layer's keys or values (the batch drops finished rows, merges a newcomer, trims
padding), the next append copies them into a fresh buffer once: the same cost torch.cat paid on every step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

MIN_HEADROOM = 256
"""Positions of spare room a buffer gets at least (a decode appends one per step)."""


class GrowingLayer(DynamicLayer):
    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._buffers: dict[str, torch.Tensor] = {}
        self.keys = self._append("keys", self.keys, key_states)
        self.values = self._append("values", self.values, value_states)
        return self.keys, self.values

    def _append(self, name: str, current: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """current [B, H, T, D] + new [B, H, N, D] as a view of this layer's buffer for `name`."""
        used = current.shape[-2] if current.numel() else 0
        total = used + new.shape[-2]
        buf = self._buffers.get(name)
        in_place = (
            buf is not None
            and used > 0
            and current.data_ptr() == buf.data_ptr()
            and current.shape[:2] == buf.shape[:2]
            and current.stride() == buf.stride()
            and total <= buf.shape[-2]
        )
        if not in_place:
            b, h, _, d = new.shape
            buf = new.new_empty((b, h, total + max(MIN_HEADROOM, total // 4), d))
            if used:
                buf[:, :, :used] = current
            self._buffers[name] = buf
        buf[:, :, used:total] = new
        return buf[:, :, :total]

    def reset(self) -> None:
        self._buffers = {}
        super().reset()


class GrowingCache(DynamicCache):
    """DynamicCache of GrowingLayers; `kv`: per layer (keys, values) [B, H, T, D] to start from (a cached prefix)."""

    def __init__(self, kv: Iterable[tuple[torch.Tensor, torch.Tensor]] | None = None):
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)
        for i, (k, v) in enumerate(kv or ()):
            self.update(k, v, i)
