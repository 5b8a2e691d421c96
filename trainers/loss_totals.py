"""A train step's loss parts summed over its micro-batches, and the step's metrics made from them."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.training import StepMetrics
from rlmath.loss import LossParts


@dataclass
class LossTotals:
    """A step's loss parts summed over its micro-batches: sample-weighted for the loss, token-weighted for the rest."""

    loss: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    clip_fraction: float = 0.0
    approx_kl: float = 0.0
    mean_advantage: float = 0.0
    tis_weight: float = 0.0
    tis_truncated: float = 0.0
    gap: float = 0.0
    tokens: int = 0
    entropy_sum: float = 0.0
    entropy_n: int = 0

    def add(self, parts: LossParts, share: float, gap: float, entropy: tuple[float, int]) -> None:
        """`share`: the micro-batch's share of the batch's samples; `entropy`: (sum, count) of an estimate, or
        (0, 0)."""
        n = parts.tokens
        self.loss += float(parts.loss.detach()) * share
        self.pg_loss += parts.pg_loss * share
        self.kl += parts.kl * n
        self.clip_fraction += parts.clip_fraction * n
        self.approx_kl += parts.approx_kl * n
        self.mean_advantage += parts.mean_advantage * n
        self.tis_weight += parts.tis_weight * n
        self.tis_truncated += parts.tis_truncated * n
        self.gap += gap
        self.tokens += n
        # Without an entropy term parts.entropy is 0 and the estimate stands in for it.
        self.entropy_sum += parts.entropy * n + entropy[0]
        self.entropy_n += entropy[1]

    def metrics(self, step: int, samples: int, grad_norm: float, tokens_per_s: float) -> StepMetrics:
        t = max(self.tokens, 1)
        return StepMetrics(
            step=step,
            samples=samples,
            tokens=self.tokens,
            loss=self.loss,
            pg_loss=self.pg_loss,
            kl=self.kl / t,
            entropy=self.entropy_sum / (self.entropy_n or t),
            clip_fraction=self.clip_fraction / t,
            approx_kl=self.approx_kl / t,
            mean_advantage=self.mean_advantage / t,
            logprob_gap=self.gap / t,
            grad_norm=grad_norm,
            tokens_per_s=tokens_per_s,
            tis_weight=self.tis_weight / t if self.tokens else 1.0,
            tis_truncated=self.tis_truncated / t,
        )
