"""The attention the engine's models run under (registered with transformers as `ATTENTION`).

Plain SDPA, except in two cases the engine marks when it calls the model:
- a decode step with a shared prefix (`shared_prefix`, engine.shared_prefix): the prefix is read once for all rows;
- a prefill chunk after cached tokens (`chunk_after_past`; with `shared_prefix` too, for prompts that start with the
  batch's shared prefix and whose caches never hold a copy of it): the chunk attends to everything before it and
  causally within itself. SDPA needs an explicit mask for that, which on CPU leaves its flash kernel for the math
  path (about 2x slower for a 2,048-token chunk after 6,000 tokens). Split up, every part runs the flash kernel
  without a mask (the shared prefix and the past fully visible, the chunk causal) and the parts merge exactly by
  log-sum-exp. CPU only: on CUDA the masked path is left to SDPA's own kernels (and no prefill reads a shared
  prefix).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from engine.shared_prefix import FLASH_CPU as _FLASH_CPU
from engine.shared_prefix import SharedView, shared_prefix_decode

ATTENTION = "ocrl_engine"


def engine_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    shared_prefix: SharedView | None = None,
    chunk_after_past: bool = False,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    q_len, kv_len = query.shape[2], key.shape[2]
    if shared_prefix is not None and q_len == 1:
        return shared_prefix_decode(module, query, key, value, attention_mask, scaling, shared_prefix), None
    if shared_prefix is not None:
        if not split_prefill_available(query.device):
            raise RuntimeError("a prefill against a shared prefix needs the CPU flash kernel")
        return _chunk_after_past(query, key, value, scaling, shared_prefix, module.layer_idx), None
    if chunk_after_past and kv_len > q_len > 1 and split_prefill_available(query.device):
        return _chunk_after_past(query, key, value, scaling), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def split_prefill_available(device: torch.device) -> bool:
    return device.type == "cpu" and _FLASH_CPU is not None


def _chunk_after_past(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scaling: float | None,
    shared: SharedView | None = None,
    layer: int = 0,
) -> torch.Tensor:
    """Attention of a chunk of q_len tokens whose keys are the last q_len of `k` (no padding anywhere), after the
    rest of `k` and, with `shared`, after the shared prefix (every row starts with it)."""
    b, heads, q_len, dim = q.shape
    kv_heads = k.shape[1]
    groups = heads // kv_heads
    past = k.shape[2] - q_len
    parts: list[tuple[torch.Tensor, torch.Tensor]] = []
    if shared is not None:  # one pass for all rows: their query heads packed per kv head along the sequence
        pk, pv = shared.prefix.layers[layer]
        packed = q.view(b, kv_heads, groups, q_len, dim).transpose(0, 1).reshape(1, kv_heads, b * groups * q_len, dim)
        o, lse = _FLASH_CPU(packed, pk.unsqueeze(0), pv.unsqueeze(0), scale=scaling)
        o = o.view(kv_heads, b, groups, q_len, dim).transpose(0, 1).reshape(b, heads, q_len, dim)
        parts.append((o, lse.view(kv_heads, b, groups, q_len).transpose(0, 1).reshape(b, heads, q_len)))
    if past:  # every query sees every past key; query heads of one kv head packed along the sequence (no copy)
        packed = q.reshape(b, kv_heads, groups * q_len, dim)
        o, lse = _FLASH_CPU(packed, k[:, :, :past], v[:, :, :past], scale=scaling)
        parts.append((o.reshape(b, heads, q_len, dim), lse.reshape(b, heads, q_len)))
    # the chunk itself: causal over its own keys (q_len x q_len: cheap to repeat for the query heads)
    kc = k[:, :, past:].repeat_interleave(groups, dim=1)
    vc = v[:, :, past:].repeat_interleave(groups, dim=1)
    parts.append(_FLASH_CPU(q, kc, vc, is_causal=True, scale=scaling))
    lse = torch.logsumexp(torch.stack([p[1] for p in parts]), dim=0)
    out = sum(o * torch.exp(part_lse - lse).unsqueeze(-1) for o, part_lse in parts)
    return out.transpose(1, 2).contiguous()  # [b, q_len, heads, dim], as sdpa_attention_forward returns


def use_engine_attention(model: torch.nn.Module) -> None:
    """Run `model` under `engine_attention` (plain SDPA unless the engine marks a call)."""
    AttentionInterface.register(ATTENTION, engine_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    model.config._attn_implementation = ATTENTION
