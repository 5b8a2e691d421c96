"""The policy loss of the paper (equation 1), as the reference computes it.

    ratio = exp(logp_new - logp_old)                 (old = the rollout log-probs)
    pg    = max(-ratio * A, -clip(ratio, 1 - eps_low, 1 + eps_high) * A)
    kl    = k3(new, ref) = exp(ref - new) - (ref - new) - 1
    loss  = mean_over_samples(mean_over_tokens(pg + kl_coef * kl - entropy_coef * H))

With `tis_cap` set (truncated importance sampling), the trust region is taken
around the trainer's own pre-update log-probs instead, and the rollout/trainer
mismatch (a stale sample, or serving numerics) is corrected by a weight:

    ratio = exp(logp_new - logp_train)              (logp_train = logp_new before the step)
    pg    = pg * min(exp(logp_train - logp_old), tis_cap)

With `max_token_gap` set, tokens whose |logp_train - logp_old| exceeds it (the
train-inference mismatch, rlmath.mismatch) are masked out of the loss
(`mismatch_method` "mask", token-level MIS), or bounded through TIS with cap
min(tis_cap, e^max_token_gap) ("tis"): one mechanism, not a second weight.

Token means are over each sample's unmasked tokens; the batch mean is over all
samples (a sample with loss mask 0 adds 0, as the reference's submissions do).
Shapes: [B, T] right-padded; `mask` is 1 on response tokens that are learned from.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlmath.mismatch import over_threshold, tis_cap_with, token_gaps

LOG_RATIO_CLAMP = 20.0
"""Log-ratios are clamped before exp so one wild token cannot overflow the loss."""


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    """0 in the reference's personal-agent scripts; 0.01-0.02 for general agents."""
    entropy_coef: float = 0.0
    tis_cap: float | None = None
    """Truncated importance sampling: None uses the rollout log-probs as the old policy (the reference's default)."""
    max_token_gap: float | None = None
    """Bound on a token's |trainer - rollout| log-prob before the update; None: measured only (rlmath.mismatch)."""
    mismatch_method: str = "mask"
    """What happens to a token over `max_token_gap`: mask (out of the loss) or tis (weight capped at e^gap)."""

    def __post_init__(self) -> None:
        if self.mismatch_method not in ("mask", "tis"):
            raise ValueError(f"mismatch method {self.mismatch_method!r}: expected mask or tis")

    @property
    def weight_cap(self) -> float | None:
        """The TIS cap the loss applies (`tis_cap`, or e^max_token_gap under the tis method)."""
        return tis_cap_with(self.tis_cap, self.max_token_gap, self.mismatch_method)


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor
    """Scalar to backpropagate."""
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    """Share of learned tokens where the clipped term was the one used."""
    approx_kl: float
    """mean of 0.5 * (new - old)^2 over learned tokens: how far the policy moved from the rollout."""
    mean_advantage: float
    tokens: int
    tis_weight: float = 1.0
    """Mean importance weight over learned tokens (1 without TIS)."""
    tis_truncated: float = 0.0
    """Share of learned tokens whose weight was cut at `tis_cap`."""
    over_tokens: int = 0
    """Learned tokens whose mismatch exceeded `max_token_gap` (masked out, or their weight capped)."""
    masked_tokens: int = 0
    """Of those, the tokens taken out of the loss (the mask method); `tokens` counts what is left."""


def k3(new_lp: torch.Tensor, ref_lp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(new || ref), per token; always >= 0."""
    d = (ref_lp - new_lp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(d) - d - 1


def masked_sample_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B, T] -> [B]: mean over each sample's masked-in tokens (0 for a sample with none)."""
    return (values * mask).sum(-1) / mask.sum(-1).clamp_min(1)


def policy_loss(
    new_lp: torch.Tensor,
    old_lp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: LossConfig = LossConfig(),
    ref_lp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    kl_coef: torch.Tensor | None = None,
) -> LossParts:
    """`kl_coef`: [B, 1] per-sample KL coefficients (samples of different streams in one batch), replacing
    `cfg.kl_coef`."""
    mask = mask.to(new_lp.dtype)
    over = over_threshold(token_gaps(new_lp, old_lp, mask), mask, cfg.max_token_gap)
    masked = 0
    if cfg.mismatch_method == "mask" and bool(over.any()):
        masked = int(over.sum())
        mask = mask * (~over).to(mask.dtype)
    cap = cfg.weight_cap
    weight = torch.ones_like(new_lp)
    if cap is not None:
        # One optimizer step per batch: the detached new log-probs are the trainer's pre-update ones.
        train_lp = new_lp.detach()
        raw = torch.exp((train_lp - old_lp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
        weight = raw.clamp(max=cap)
        old_lp = train_lp
    log_ratio = (new_lp - old_lp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    unclipped = -ratio * advantages
    clipped = -ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * advantages
    pg = torch.maximum(unclipped, clipped) * weight
    per_token = pg
    kl = torch.zeros_like(pg)
    coef = kl_coef if kl_coef is not None else cfg.kl_coef
    if ref_lp is not None and (bool((coef != 0).any()) if isinstance(coef, torch.Tensor) else coef):
        kl = k3(new_lp, ref_lp)
        per_token = per_token + coef * kl
    ent = entropy if entropy is not None else torch.zeros_like(pg)
    if cfg.entropy_coef and entropy is not None:
        per_token = per_token - cfg.entropy_coef * entropy
    loss = masked_sample_mean(per_token, mask).mean()
    with torch.no_grad():
        n = mask.sum().clamp_min(1)
        return LossParts(
            loss=loss,
            pg_loss=float(masked_sample_mean(pg, mask).mean()),
            kl=float((kl * mask).sum() / n),
            entropy=float((ent * mask).sum() / n),
            clip_fraction=float(((clipped > unclipped).to(mask.dtype) * mask).sum() / n),
            approx_kl=float((0.5 * log_ratio.pow(2) * mask).sum() / n),
            mean_advantage=float((advantages * mask).sum() / n),
            tokens=int(mask.sum()),
            tis_weight=float((weight * mask).sum() / n),
            tis_truncated=float(((weight < raw).to(mask.dtype) * mask).sum() / n) if cap is not None else 0.0,
            over_tokens=int(over.sum()),
            masked_tokens=masked,
        )
