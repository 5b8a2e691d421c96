"""One KV prefix shared by many rows of a decode batch, attended once per step (cascade attention).

OpenClaw sends the same 8-12K-token system prompt with every request. The prefix cache already saves its prefill;
without sharing, every row of the decode batch still carries its own copy of that KV, and each decode step reads
16 copies of it. Here the batch keeps the prefix once; a row that starts with it keeps only the rest of its KV.
Attention of a decode step is split in two and merged exactly by log-sum-exp:

    o = (o_prefix * exp(lse_prefix) + o_own * exp(lse_own)) / (exp(lse_prefix) + exp(lse_own))

where the prefix part is one matmul of every row's query against the one prefix (read once, not once per row), and
the own part is the usual attention over the row's own (left-padded) cache. Rows that do not start with the prefix
get exp(lse_prefix) = 0. Only decode steps (one query token per row) take this path (engine.attention).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import torch

log = structlog.get_logger(__name__)
FLASH_CPU = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
"""PyTorch's CPU flash-attention kernel (output and log-sum-exp, no score matrix held); None in builds without it."""

MIN_SHARED_TOKENS = 256
"""A shorter common prefix is not worth a re-layout of the batch."""


@dataclass
class SharedPrefix:
    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    """Per layer (keys, values) [kv_heads, len(ids), head_dim], RoPE applied (as cached)."""

    def __len__(self) -> int:
        return len(self.ids)

    def starts(self, ids: list[int]) -> bool:
        n = len(self.ids)
        return len(ids) > n and ids[:n] == self.ids


@dataclass
class SharedView:
    """What one decode forward pass passes down to attention: the prefix and which rows start with it."""

    prefix: SharedPrefix
    uses: torch.Tensor
    """[B] bool."""


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the common start of two token lists. List comparisons run in C: whole lists first (prompts that
    share a system prompt mostly agree up to a short question), then halving the span that differs: 0.3 ms for two
    8,000-token prompts, where building two tensors to compare takes 2 ms, and 16 rows joining compare 15 pairs."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def shared_prefix_decode(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    shared_prefix: SharedView,
) -> torch.Tensor:
    """One decode step's attention ([b, 1, heads, dim], as sdpa_attention_forward returns) over the shared prefix and
    each row's own cache."""
    b, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(b, kv_heads, groups, dim).float()  # head h reads kv head h // groups (repeat_kv's order)

    # the row's own keys: [b, kv_heads, groups, T]
    scores = torch.matmul(q, key.float().transpose(-1, -2)) * scale
    if attention_mask is not None:  # [b, 1, 1, T]: bool (True attends) or additive float
        m = attention_mask[:, :, :1, :]
        scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m.float()
    lse_own = torch.logsumexp(scores, dim=-1)
    o_own = torch.matmul(torch.softmax(scores, dim=-1), value.float())

    # the shared prefix, read once for all rows: [kv_heads, b * groups, P]
    pk, pv = shared_prefix.prefix.layers[module.layer_idx]
    qs = q.permute(1, 0, 2, 3).reshape(kv_heads, b * groups, dim)
    flash = _cuda_flash(qs, pk, pv, scale) if qs.device.type == "cuda" else None
    if flash is not None:
        o_sh, lse_sh = flash
    elif FLASH_CPU is not None and qs.device.type == "cpu" and pk.dtype == qs.dtype == pv.dtype:
        # one pass over the prefix, never holding the [rows, prefix] scores: 2-3x faster at 8,000 tokens
        o, lse = FLASH_CPU(qs.unsqueeze(0), pk.unsqueeze(0), pv.unsqueeze(0), scale=scale)
        o_sh, lse_sh = o[0], lse[0]
    else:
        s2 = torch.bmm(qs, pk.float().transpose(1, 2)) * scale
        lse_sh = torch.logsumexp(s2, dim=-1)
        o_sh = torch.bmm(torch.softmax(s2, dim=-1), pv.float())
    lse_sh = lse_sh.view(kv_heads, b, groups).permute(1, 0, 2)
    o_sh = o_sh.view(kv_heads, b, groups, dim).permute(1, 0, 2, 3)
    lse_sh = lse_sh.masked_fill(~shared_prefix.uses.view(b, 1, 1), float("-inf"))

    lse = torch.logaddexp(lse_own, lse_sh)
    out = o_own * torch.exp(lse_own - lse).unsqueeze(-1) + o_sh * torch.exp(lse_sh - lse).unsqueeze(-1)
    # [b, kv_heads, groups, dim] -> [b, 1, heads, dim], as sdpa_attention_forward returns
    return out.reshape(b, heads, dim).unsqueeze(1).to(query.dtype)


_CUDA_FLASH = {"ok": True}


def _cuda_flash(
    qs: torch.Tensor, pk: torch.Tensor, pv: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The prefix part on CUDA through the flash kernel, in the prefix's own dtype: the fp32 path copies the whole
    prefix's K and V to fp32 at every layer of every step (2.5 GB a step for an 11K-token prompt of a 1.7B model)
    and holds the [rows, prefix] scores. (output [kv_heads, n, dim] fp32, log-sum-exp [kv_heads, n]); None when the
    kernel is not there for these inputs (then, and from then on, the fp32 path)."""
    if not _CUDA_FLASH["ok"] or pk.dtype not in (torch.bfloat16, torch.float16) or pv.dtype != pk.dtype:
        return None
    try:
        out = torch.ops.aten._scaled_dot_product_flash_attention(
            qs.to(pk.dtype).unsqueeze(0), pk.unsqueeze(0), pv.unsqueeze(0), scale=scale
        )
        o, lse = out[0][0].float(), out[1][0].float()
        # once per process: the kernel's output and log-sum-exp, read as this file reads them, against fp32
        if not _CUDA_FLASH.get("checked"):
            s2 = torch.bmm(qs.float(), pk.float().transpose(1, 2)) * scale
            if not (
                torch.allclose(lse, torch.logsumexp(s2, dim=-1), atol=5e-2)
                and torch.allclose(o, torch.bmm(torch.softmax(s2, dim=-1), pv.float()), atol=5e-2)
            ):
                raise RuntimeError("flash attention's output or log-sum-exp disagrees with the fp32 path")
            _CUDA_FLASH["checked"] = True
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        _CUDA_FLASH["ok"] = False  # an older GPU or build: the exact fp32 path serves from now on
        log.warning("shared prefix: no flash kernel, the fp32 path serves", error=str(exc)[:300])
        return None
    return o, lse
