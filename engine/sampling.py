"""From hidden states to tokens: the LM head applied in chunks (`_project`), one draw per row from that row's own
sampling parameters (`_sample`), and a position's top alternatives (`_tops`). Log-probs follow `rlmath.logprobs`
(the convention the trainer uses too)."""

from __future__ import annotations

import torch

from engine.weights import LoadedModel
from engine.work import _Row
from policy_client.wire import LogprobEntry, SamplingParams
from rlmath.logprobs import scoring_temperature, softmax_parts

LM_HEAD_CHUNK = 512  # positions projected to the vocabulary at once (bounds [chunk, V] memory)


CDF_BLOCK = 1024
"""Sampling takes a token's block of the vocabulary first, then the token inside it (see `_inverse_cdf`)."""


def _sample(
    logits: torch.Tensor, rows: list[_Row], generator: torch.Generator, want_logprobs: bool
) -> tuple[torch.Tensor, list[float] | None]:
    """Draw one token per row from its own temperature / top-k / top-p / min-p distribution, and the drawn tokens'
    log-probs (rlmath's convention) when `want_logprobs`.

    One exp pass over [B, V] gives both logz and the probabilities, and the draw itself reads only block sums:
    every other pass over a 150k vocabulary costs each row as much again, which is what limits batching on a CPU.
    """
    dev = logits.device
    greedy = [r.params.temperature == 0 or r.params.top_k == 1 for r in rows]
    sampled = [i for i, g in enumerate(greedy) if not g]
    tokens = torch.empty(len(rows), dtype=torch.long, device=dev)
    if not sampled:
        tokens = logits.argmax(dim=-1)
    elif len(sampled) < len(rows):
        picked = [i for i, g in enumerate(greedy) if g]
        tokens[picked] = logits[picked].argmax(dim=-1)
    if not sampled and not want_logprobs:
        return tokens, None
    temps = [scoring_temperature(r.params.temperature) for r in rows]
    scaled, logz, weights = softmax_parts(
        logits, 1.0 if all(t == 1.0 for t in temps) else torch.tensor(temps, device=dev)
    )
    if sampled:
        index = torch.tensor(sampled, device=dev)
        # The row's distribution at its temperature (= its scoring temperature, as it is not greedy), unnormalised.
        probs = weights if len(sampled) == len(rows) else weights[index]
        for k, i in enumerate(sampled):
            p = rows[i].params
            if p.top_k > 0 or p.top_p < 1.0 or p.min_p > 0:
                probs[k] = _truncate(probs[k], p)
        tokens[index] = _inverse_cdf(probs, generator)
    if not want_logprobs:
        return tokens, None
    return tokens, (scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - logz).tolist()


def _inverse_cdf(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row from unnormalised probabilities [B, V], exactly from p: one uniform number against the
    cumulative distribution, taken in float64 over the blocks' sums and then inside the chosen block only
    ([B, V / CDF_BLOCK] and [B, CDF_BLOCK] cumulative sums instead of [B, V]). A noise tensor of size [B, V]
    (torch.multinomial, Gumbel) costs milliseconds per row on a 150k vocabulary on CPU."""
    rows, vocab = probs.shape
    full = vocab // CDF_BLOCK
    sums = probs[:, : full * CDF_BLOCK].reshape(rows, full, CDF_BLOCK).sum(-1)
    if vocab > full * CDF_BLOCK:
        sums = torch.cat([sums, probs[:, full * CDF_BLOCK :].sum(-1, keepdim=True)], dim=1)
    block_cdf = sums.double().cumsum(dim=-1)  # [B, blocks]
    u = torch.rand((rows, 1), generator=generator, device=probs.device, dtype=torch.float64) * block_cdf[:, -1:]
    b = torch.searchsorted(block_cdf, u).clamp_max(block_cdf.shape[1] - 1)  # block_cdf[b-1] < u <= block_cdf[b]
    before = torch.where(b > 0, block_cdf.gather(1, (b - 1).clamp_min(0)), torch.zeros_like(u))
    index = b * CDF_BLOCK + torch.arange(CDF_BLOCK, device=probs.device)  # [B, CDF_BLOCK]
    inner = probs.gather(1, index.clamp_max(vocab - 1)).masked_fill(index >= vocab, 0.0).double().cumsum(dim=-1)
    # Rounding can put u a hair past the block's own total: aim at its last token with mass, never beyond.
    j = torch.searchsorted(inner, torch.minimum(u - before, inner[:, -1:]))
    return (b * CDF_BLOCK + j).squeeze(-1).clamp_max(vocab - 1)


def _truncate(probs: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Zero the tokens that top-k, min-p and top-p exclude (the rest need not sum to 1)."""
    if p.top_k > 1:
        kth = torch.topk(probs, min(p.top_k, probs.numel())).values[-1]
        probs = probs.masked_fill(probs < kth, 0.0)
    if p.min_p > 0:
        probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
    if p.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        cut = torch.cumsum(sorted_p, dim=-1) - sorted_p > p.top_p * sorted_p.sum()  # keep the token that crosses top_p
        probs = probs.scatter(0, order, sorted_p.masked_fill(cut, 0.0))
    return probs


def _tops(scaled_logprobs: torch.Tensor, k: int) -> list[LogprobEntry]:
    values, ids = torch.topk(scaled_logprobs, k)
    return [(float(v), int(t), None) for v, t in zip(values.tolist(), ids.tolist())]


def _project(lm: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """Hidden states [N, H] -> logits [N, V], in chunks so long prompts fit in memory."""
    head = lm.model.get_output_embeddings()
    parts = [head(hidden[i : i + LM_HEAD_CHUNK]) for i in range(0, hidden.shape[0], LM_HEAD_CHUNK)]
    return torch.cat(parts, dim=0) if parts else hidden.new_zeros((0, lm.vocab_size))
