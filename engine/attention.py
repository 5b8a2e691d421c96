"""The attention the engine's models run under (registered with transformers as `ATTENTION`).

Plain SDPA, except in two cases the engine marks when it calls the model:
- a decode step with a shared prefix (`shared_prefix`, engine.shared_prefix): the prefix is read once for all rows;
- a prefill chunk after cached tokens (`chunk_after_past`): a prompt's next chunk attends to everything before it and
  causally within itself. SDPA then needs an explicit mask, which on CPU leaves its flash kernel for the math path
  (about 2x slower for a 2,048-token chunk after 6,000 tokens). Split in two, both parts run the flash kernel with no
  mask (the past part fully visible, the chunk part causal) and merge exactly by log-sum-exp. CPU only: on CUDA the
  mask path is left to SDPA's own kernels.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from engine.shared_prefix import SharedView, shared_prefix_decode

ATTENTION = "ocrl_engine"

_FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


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
    if chunk_after_past and kv_len > q_len > 1 and query.device.type == "cpu" and _FLASH_CPU is not None:
        return _chunk_after_past(query, key, value, scaling), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def _chunk_after_past(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float | None) -> torch.Tensor:
    """Attention of a chunk of q_len tokens whose keys are the last q_len of `k` (no padding anywhere)."""
    b, heads, q_len, dim = q.shape
    kv_heads = k.shape[1]
    groups = heads // kv_heads
    past = k.shape[2] - q_len
    # past part: every query sees every past key; query heads of one kv head packed along the sequence (no copy)
    packed = q.reshape(b, kv_heads, groups * q_len, dim)
    o_past, lse_past = _FLASH_CPU(packed, k[:, :, :past], v[:, :, :past], scale=scaling)
    o_past = o_past.reshape(b, heads, q_len, dim)
    lse_past = lse_past.reshape(b, heads, q_len)
    # chunk part: causal over the chunk's own keys (q_len x q_len: cheap to repeat for the query heads)
    kc = k[:, :, past:].repeat_interleave(groups, dim=1)
    vc = v[:, :, past:].repeat_interleave(groups, dim=1)
    o_new, lse_new = _FLASH_CPU(q, kc, vc, is_causal=True, scale=scaling)
    lse = torch.logaddexp(lse_past, lse_new)
    out = o_past * torch.exp(lse_past - lse).unsqueeze(-1) + o_new * torch.exp(lse_new - lse).unsqueeze(-1)
    return out.transpose(1, 2).contiguous()  # [b, q_len, heads, dim], as sdpa_attention_forward returns


def use_engine_attention(model: torch.nn.Module) -> None:
    """Run `model` under `engine_attention` (plain SDPA unless the engine marks a call)."""
    AttentionInterface.register(ATTENTION, engine_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    model.config._attn_implementation = ATTENTION
