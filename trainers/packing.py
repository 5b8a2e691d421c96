"""A micro-batch's samples packed into one row, without padding, each attending only to itself.

Padding every sample to the longest one's length wastes the difference in every layer: with answers of 50 to 500
tokens, most of a padded batch is padding. Packed, the row is the samples one after another; positions restart
at 0 for each (so rotary embeddings see what the engine saw), and attention runs per sample (`document_lengths`,
passed through the model's forward to `packed_attention`): causal within a sample, nothing across. On CUDA the
samples go to one variable-length flash-attention call when PyTorch has it (torch.nn.attention.varlen); otherwise
each sample is its own SDPA call (flash kernels on CUDA and CPU, no mask).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from dataclasses import dataclass

import structlog
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from store.samples import TrainingSample

ATTENTION = "ocrl_packed"
log = structlog.get_logger(__name__)
_PACKING: contextvars.ContextVar[bool] = contextvars.ContextVar("ocrl_packing", default=False)


@dataclass(frozen=True)
class PackedRow:
    ids: torch.Tensor
    """[1, T] every sample's prompt and response, one after another."""
    positions: torch.Tensor
    """[1, T] each token's position within its own sample."""
    lengths: tuple[int, ...]
    """Each sample's length, in order."""
    starts: torch.Tensor
    """[B] where each sample begins in the row."""


def pack(group: list[TrainingSample], device: torch.device) -> PackedRow:
    seqs = [s.prompt_ids + s.response_ids for s in group]
    lengths = tuple(len(x) for x in seqs)
    ids = torch.tensor([t for x in seqs for t in x], dtype=torch.long)
    positions = torch.cat([torch.arange(n) for n in lengths])
    starts = torch.tensor([0, *lengths[:-1]]).cumsum(0)
    return PackedRow(ids[None].to(device), positions[None].to(device), lengths, starts.to(device))


def packed_hidden(decoder: torch.nn.Module, row: PackedRow) -> torch.Tensor:
    """The decoder's last hidden states [T, H] for a packed row."""
    with packing():
        out = decoder(input_ids=row.ids, position_ids=row.positions, document_lengths=row.lengths, use_cache=False)
    return out.last_hidden_state[0]


@contextlib.contextmanager
def packing():
    """Marks the forward whose mask must not be built: attention keeps to each sample by itself (a [T, T] mask
    would be 1 GB at 32K tokens, and would push SDPA off its flash kernels)."""
    token = _PACKING.set(True)
    try:
        yield
    finally:
        _PACKING.reset(token)


def _mask(*args, **kwargs):
    return None if _PACKING.get() else sdpa_mask(*args, **kwargs)


@torch.compiler.disable  # outside a compiled layer's graph: its guards then never depend on a batch's sample lengths
def packed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    document_lengths: tuple[int, ...] | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA, except for a packed row (`document_lengths`): causal attention within each sample only.
    query [1, Hq, T, D], key and value [1, Hkv, T, D] -> [1, T, Hq, D]."""
    if document_lengths is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if len(document_lengths) > 1 and _varlen_usable(_half(query)):
        try:
            # Under autocast Qwen3's rotary leaves q and k in fp32; the flash kernel takes the autocast dtype only.
            # SDPA under autocast computes in that dtype too, so this changes no precision, only the kernel.
            q, k, v = _half(query), _half(key), _half(value)
            out = _varlen(q, k, v, document_lengths, scaling)
            _VARLEN["taken"] = int(_VARLEN["taken"]) + 1  # a benchmark reports whether the kernel ran at all
            return out, None
        except (RuntimeError, TypeError, NotImplementedError) as exc:  # an older PyTorch's signature or kernel
            _VARLEN["ok"] = False
            log.warning("packed_attention.varlen_unavailable", error=str(exc)[:300])
    outs, at = [], 0
    for n in document_lengths:
        part = slice(at, at + n)
        o, _ = sdpa_attention_forward(
            module, query[:, :, part], key[:, :, part], value[:, :, part], None, scaling=scaling, is_causal=True
        )
        outs.append(o)
        at += n
    return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)), None


_VARLEN: dict[str, object] = {"ok": None, "fn": None, "taken": 0}
"""ok: the kernel passed its self-test (None: not tried yet); fn: torch's varlen_attn; taken: packed attention calls
it served (per process)."""


def varlen_calls() -> int:
    """How many packed attention calls the variable-length kernel served in this process."""
    return int(_VARLEN["taken"])


def _half(t: torch.Tensor) -> torch.Tensor:
    """`t` in CUDA autocast's dtype when autocast is on and `t` is fp32; otherwise `t` itself."""
    if t.device.type == "cuda" and t.dtype == torch.float32 and torch.is_autocast_enabled("cuda"):
        return t.to(torch.get_autocast_dtype("cuda"))
    return t


def _varlen_usable(query: torch.Tensor) -> bool:
    if query.device.type != "cuda" or query.dtype not in (torch.bfloat16, torch.float16):
        return False
    if _VARLEN["ok"] is None:
        try:
            from torch.nn.attention.varlen import varlen_attn

            _VARLEN["fn"] = varlen_attn
            _self_test(query)  # forward and backward on a small input: a kernel missing here fails now, not mid-step
            _VARLEN["ok"] = True
        except (ImportError, RuntimeError, TypeError, NotImplementedError) as exc:
            _VARLEN["ok"] = False
            log.warning("packed_attention.varlen_unavailable", error=str(exc)[:300])
    return bool(_VARLEN["ok"])


def _self_test(like: torch.Tensor) -> None:
    q = torch.randn(1, 4, 24, 64, device=like.device, dtype=like.dtype, requires_grad=True)
    kv = torch.randn(1, 2, 24, 64, device=like.device, dtype=like.dtype, requires_grad=True)
    out = _varlen(q, kv, kv, (10, 14), None)
    ref = torch.cat(
        [
            torch.nn.functional.scaled_dot_product_attention(
                q[:, :, a:b], kv[:, :, a:b], kv[:, :, a:b], is_causal=True, enable_gqa=True
            ).transpose(1, 2)
            for a, b in ((0, 10), (10, 24))
        ],
        dim=1,
    )
    out.float().sum().backward()
    if not torch.allclose(out.float(), ref.float(), atol=2e-2):
        raise RuntimeError("varlen_attn disagrees with per-sample SDPA")


def _varlen(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, lengths: tuple[int, ...], scaling: float | None
) -> torch.Tensor:
    fn = _VARLEN["fn"]
    params = inspect.signature(fn).parameters
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # [T, H, D]
    if q.shape[1] != k.shape[1] and "enable_gqa" not in params:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    cu = torch.tensor([0, *lengths], device=q.device, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    longest = max(lengths)
    extra: dict = {"scale": scaling}
    if "enable_gqa" in params and q.shape[1] != k.shape[1]:
        extra["enable_gqa"] = True
    if "window_size" in params:
        extra["window_size"] = (-1, 0)  # causal
    elif "is_causal" in params:
        extra["is_causal"] = True
    else:
        raise TypeError("varlen_attn takes neither window_size nor is_causal: cannot ask for causal attention")
    out = fn(q, k, v, cu, cu, longest, longest, **extra)
    return out.unsqueeze(0)  # [1, T, Hq, D]


def use_packed_attention(model: torch.nn.Module) -> None:
    """Run `model` under `packed_attention` (plain SDPA unless a forward passes `document_lengths`)."""
    AttentionInterface.register(ATTENTION, packed_attention)
    AttentionMaskInterface.register(ATTENTION, _mask)
    model.config._attn_implementation = ATTENTION
