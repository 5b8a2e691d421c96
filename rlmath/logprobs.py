"""The one definition of "the log-prob of a token" shared by serving and training.

Convention (the same as slime's trainer and SGLang's sampler): a token's
log-prob is log_softmax(logits / T) at the position that produced it, over the
full vocabulary, where T is the sampling temperature of the request. T == 0
(greedy) is scored at T = 1. top_p / top_k truncation is NOT applied: it only
restricts which token may be drawn, and truncated distributions give -inf
log-probs that no importance ratio can use. The trainer must call
`token_logprobs` with the rollout temperature so that ratio = exp(new - old)
compares like with like.
"""

from __future__ import annotations

import torch


def scoring_temperature(temperature: float) -> float:
    """Temperature at which log-probs are reported for a request sampled at `temperature`."""
    return temperature if temperature > 0 else 1.0


def _scaled(logits: torch.Tensor, temperature: float | torch.Tensor) -> torch.Tensor:
    """float32 logits / T, with T a scalar or one per row; T = 1 skips the [..., V] division."""
    scaled = logits.float()
    if isinstance(temperature, torch.Tensor):
        return scaled / temperature.float().clamp_min(1e-6).unsqueeze(-1)
    if temperature != 1.0:
        return scaled / scoring_temperature(float(temperature))
    return scaled


def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float | torch.Tensor = 1.0
) -> torch.Tensor:
    """Log-probs of `targets` under logits scaled by temperature.

    logits: [..., V] float; targets: [...] long; temperature: scalar or [...] (per row).
    Returns [...] float32. Computed in float32 whatever the logits dtype.
    """
    scaled = _scaled(logits, temperature)
    logz = torch.logsumexp(scaled, dim=-1)
    picked = scaled.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - logz


def softmax_parts(
    logits: torch.Tensor, temperature: float | torch.Tensor = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`token_logprobs` in parts, for a caller that also samples from the same distribution (the engine):
    scaled [..., V] float32, logz [...] and weights = exp(scaled - max) [..., V], the unnormalised
    probabilities. log-prob = scaled[target] - logz, equal to `token_logprobs` within float32 rounding; one
    exp pass over the vocabulary serves both (logsumexp and softmax would take one each)."""
    scaled = _scaled(logits, temperature)
    top = scaled.amax(dim=-1, keepdim=True)
    weights = scaled - top
    weights.exp_()
    return scaled, top.squeeze(-1) + weights.sum(dim=-1).log(), weights


def token_entropy(logits: torch.Tensor, temperature: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Entropy of the temperature-scaled distribution at each position: [..., V] -> [...] float32."""
    scaled = _scaled(logits, temperature)
    logz = torch.logsumexp(scaled, dim=-1)
    return logz - (torch.softmax(scaled, dim=-1) * scaled).sum(-1)
