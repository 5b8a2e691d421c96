"""Token log-probs (and entropy) straight from hidden states and the output layer, a chunk of positions at a time.

The plain way projects every response position to the vocabulary and keeps the fp32 logits [N, V] for the
backward, plus their gradient: at Qwen's 151,936-token vocabulary that is 1.2 GB per 1,000 positions, more than
the rest of a 1.7B model's activations for a long answer. Here the forward keeps only each position's log-sum-exp,
and the backward recomputes a chunk's logits to form its gradient (the fused linear-cross-entropy idea of
Liger-Kernel and Apple's Cut Cross-Entropy, written with plain matmuls so it runs on any device). Peak memory for
the head is then one chunk's [rows, V], whatever N.

The numbers are `rlmath.logprobs`'s: logits in fp32 from fp32 hidden states and weights, divided by the scoring
temperature, log-softmax over the full vocabulary. Tested against that unchunked computation, values and
gradients (tests/trainers/test_trainer_kernels.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

CHUNK_BYTES = 256 * 2**20
"""fp32 logits a chunk may hold (its softmax and gradient take as much again, each)."""
KEEP_BYTES = 2**30
"""Up to this many bytes of fp32 log-softmax in all, the forward keeps them for the backward (what the unchunked
computation holds anyway) instead of recomputing them: the recompute is a third more work for the output layer,
which is most of a small model's step. Above it, memory wins."""


@dataclass(frozen=True)
class HeadInput:
    """What the output layer would turn into logits at the response positions: hidden states [N, H] and the layer's
    weight [V, H] (no bias: Qwen's head has none). Kept apart so that log-probs are computed chunk by chunk."""

    hidden: torch.Tensor
    weight: torch.Tensor
    tf32: bool = False
    """Let the fp32 projection use TF32 tensor cores (CUDA): ~10x the speed of fp32 for about 1e-3 of error in a
    log-prob; bf16 logits would cost ~6e-2."""

    def logits(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """fp32 logits of all positions or of `rows` (no chunking: for a few positions, such as the entropy
        estimate)."""
        h = self.hidden if rows is None else self.hidden[rows]
        with tf32_matmuls(self.tf32):
            return h.float() @ self.weight.float().T


def rows_per_chunk(vocab: int, budget: int = CHUNK_BYTES) -> int:
    return max(1, budget // (vocab * 4))


@contextlib.contextmanager
def tf32_matmuls(tf32: bool):
    if not tf32:
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _inv_temperature(temperature: float | torch.Tensor, n: int, device: torch.device) -> torch.Tensor | None:
    """[N, 1] fp32: 1 / T per position (T scalar or [N]); None for T = 1 (no [N, V] pass to scale by it)."""
    if isinstance(temperature, torch.Tensor):
        return (1.0 / temperature.float().clamp_min(1e-6)).reshape(n, 1).to(device)
    if float(temperature) == 1.0:
        return None
    return torch.full((n, 1), 1.0 / float(temperature), device=device)


class _LinearLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, inv_t, chunk: int, with_entropy: bool, tf32: bool, keep: bool):
        n = hidden.shape[0]
        lp = hidden.new_empty(n, dtype=torch.float32)
        lse = torch.empty_like(lp)
        ent = torch.empty_like(lp) if with_entropy else None
        w = weight.float()
        kept = []
        with tf32_matmuls(tf32):
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                z = hidden[s:e].float() @ w.T
                if inv_t is not None:
                    z.mul_(inv_t[s:e])
                lse[s:e] = torch.logsumexp(z, dim=-1)
                lp[s:e] = z.gather(-1, targets[s:e, None]).squeeze(-1) - lse[s:e]
                if ent is not None or keep:
                    z.sub_(lse[s:e, None])  # log p
                if ent is not None:
                    ent[s:e] = -(z.exp() * z).sum(-1)
                if keep:
                    kept.append(z)
        ctx.save_for_backward(hidden, weight, targets, lse, ent if ent is not None else lse)
        ctx.inv_t, ctx.kept = inv_t, kept
        ctx.chunk, ctx.with_entropy, ctx.tf32 = chunk, with_entropy, tf32
        return (lp, ent) if with_entropy else (lp, lp.new_zeros(0))

    @staticmethod
    def backward(ctx, g_lp, g_ent):
        hidden, weight, targets, lse, ent = ctx.saved_tensors
        inv_t, kept = ctx.inv_t, ctx.kept
        ctx.kept = []  # each kept chunk is consumed (overwritten) below
        n = hidden.shape[0]
        w = weight.float()
        g_h = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device) if ctx.needs_input_grad[0] else None
        g_w = torch.zeros_like(w) if ctx.needs_input_grad[1] else None
        rows = torch.arange(min(ctx.chunk, n), device=hidden.device)
        entropy_grad = ctx.with_entropy and g_ent is not None and g_ent.numel()
        with tf32_matmuls(ctx.tf32):
            for c, s in enumerate(range(0, n, ctx.chunk)):
                e = min(n, s + ctx.chunk)
                h = hidden[s:e].float()
                if kept:
                    logp = kept[c]
                else:
                    logp = h @ w.T
                    if inv_t is not None:
                        logp.mul_(inv_t[s:e])
                    logp.sub_(lse[s:e, None])
                # z = logits / T.  d lp / d z = onehot(target) - p;  d entropy / d z = -p (log p + entropy)
                scale = g_lp[s:e, None] if inv_t is None else g_lp[s:e, None] * inv_t[s:e]
                if entropy_grad:
                    g_e = g_ent[s:e, None] if inv_t is None else g_ent[s:e, None] * inv_t[s:e]
                    p = logp.exp()
                    gz = logp.add_(ent[s:e, None]).mul_(p).mul_(-g_e)  # in place over log p: not needed again
                    gz.sub_(p.mul_(scale))
                else:
                    gz = logp.exp_().mul_(-scale)  # in place: log p becomes the gradient
                gz[rows[: e - s], targets[s:e]] += scale.squeeze(-1)
                if g_h is not None:
                    g_h[s:e] = gz @ w
                if g_w is not None:
                    g_w.addmm_(gz.T, h)
        return (
            g_h.to(hidden.dtype) if g_h is not None else None,
            g_w.to(weight.dtype) if g_w is not None else None,
            None,
            None,
            None,
            None,
            None,
            None,
        )


def linear_logprobs(
    head: HeadInput,
    targets: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    with_entropy: bool = False,
    chunk_rows: int | None = None,
    keep_bytes: int = KEEP_BYTES,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs [N] of `targets` under the head's logits at `temperature` (scalar or [N]) and, with
    `with_entropy`, each position's entropy [N] (both differentiable), never holding more than `chunk_rows`
    positions' logits at a time (and, above `keep_bytes` of them in all, recomputing them in the backward)."""
    n, vocab = head.hidden.shape[0], head.weight.shape[0]
    chunk = chunk_rows or rows_per_chunk(vocab)
    inv_t = _inv_temperature(temperature, n, head.hidden.device)
    keep = head.hidden.requires_grad or head.weight.requires_grad
    keep = keep and torch.is_grad_enabled() and n * vocab * 4 <= keep_bytes
    lp, ent = _LinearLogprobs.apply(head.hidden, head.weight, targets, inv_t, chunk, with_entropy, head.tf32, keep)
    return lp, (ent if with_entropy else None)
