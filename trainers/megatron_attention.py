"""megatron-core's local attention with PyTorch SDPA at its core.

Without Transformer Engine, megatron-core's local layer spec runs `DotProductAttention`: the scores of every head
materialised as [batch, heads, W, W], masked, softmaxed in fp32, then multiplied out. That is the megatron backend's
memory and speed gap to the torch backend on a GPU (measured: 58 GiB against 43 for the same step). SDPA computes
the same attention with flash kernels (CUDA and CPU) without holding the scores. Anything this class does not
cover (a non-causal mask, packed sequences, attention bias, a non-vanilla softmax, query-key layer scaling,
attention dropout) goes to megatron-core's own path unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType
except ImportError as exc:  # reached only through the megatron backend, which checks first (trainers.backend_missing)
    raise ImportError(
        f"training.backend=megatron needs megatron-core: pip install 'openclaw-rl[megatron]' ({exc})"
    ) from exc


class SdpaAttention(DotProductAttention):
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: AttnMaskType | None = None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params=None,
        **kwargs,
    ) -> torch.Tensor:
        mask_type = attn_mask_type if attn_mask_type is not None else self.attn_mask_type
        if (
            mask_type != AttnMaskType.causal
            or packed_seq_params is not None
            or attention_bias is not None
            or kwargs
            or getattr(self.config, "softmax_type", "vanilla") != "vanilla"
            or self.config.apply_query_key_layer_scaling
            or (self.training and self.config.attention_dropout)
        ):
            return super().forward(
                query, key, value, attention_mask, attn_mask_type, attention_bias, packed_seq_params, **kwargs
            )
        # [s, b, heads, hn] -> [b, heads, s, hn]; the causal mask megatron passes is what is_causal means.
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
        seq, batch = out.shape[2], out.shape[0]
        return out.permute(2, 0, 1, 3).reshape(seq, batch, self.hidden_size_per_partition)


def sdpa_layer_spec(qk_layernorm: bool):
    """megatron-core's local GPT layer spec (RMSNorm) with `SdpaAttention` as its core attention."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(qk_layernorm=qk_layernorm, normalization="RMSNorm")
    spec.submodules.self_attention.submodules.core_attention = SdpaAttention
    return spec
