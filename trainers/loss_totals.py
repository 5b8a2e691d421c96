"""A train step's loss parts summed over its micro-batches, and the step's metrics made from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from contracts.training import SampleMismatch, StepMetrics
from rlmath import mismatch
from rlmath.loss import LossParts
from store.samples import TrainingSample


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
    measured: int = 0
    """Learned tokens before any mismatch masking (what `gap` is summed over)."""
    over_tokens: int = 0
    masked_tokens: int = 0
    per_sample: list[SampleMismatch] = field(default_factory=list)
    """Not a sum: kept by the process that ran the samples (a data-parallel replica's own)."""
    fresh_gaps: list[torch.Tensor] = field(default_factory=list)
    """Token gaps of staleness-0 samples, flat on the CPU (also per process)."""
    stale_gaps: list[torch.Tensor] = field(default_factory=list)

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
        self.masked_tokens += parts.masked_tokens
        self.tokens += n
        # Without an entropy term parts.entropy is 0 and the estimate stands in for it.
        self.entropy_sum += parts.entropy * n + entropy[0]
        self.entropy_n += entropy[1]

    def add_mismatch(
        self,
        group: list[TrainingSample],
        train_lp: torch.Tensor,
        rollout_lp: torch.Tensor,
        mask: torch.Tensor,
        max_gap: float | None,
        staleness: Mapping[str, int] | None,
    ) -> float:
        """A micro-batch's train-inference mismatch (rlmath.mismatch), per sample and per token; returns the gap's
        sum over its learned tokens. `staleness`: versions behind the trainer by sample id (None: every sample is
        of the trainer's weights; a sample it does not name: not known, counted with the stale ones)."""
        gaps = mismatch.token_gaps(train_lp, rollout_lp, mask)
        over = mismatch.over_threshold(gaps, mask, max_gap)
        fresh, stale = [], []
        for i, (s, fig) in enumerate(zip(group, mismatch.per_sample(gaps, mask, over))):
            behind = 0 if staleness is None else staleness.get(s.sample_id)
            (fresh if behind == 0 else stale).append(i)
            self.per_sample.append(
                SampleMismatch(
                    sample_id=s.sample_id,
                    staleness=behind,
                    tokens=fig.tokens,
                    mean=fig.mean,
                    max=fig.max,
                    over=fig.over,
                )
            )
            self.measured += fig.tokens
            self.over_tokens += fig.over
        self.fresh_gaps.append(mismatch.learned_gaps(gaps, mask, fresh))
        self.stale_gaps.append(mismatch.learned_gaps(gaps, mask, stale))
        return float(gaps.sum())

    def metrics(self, step: int, samples: int, grad_norm: float, tokens_per_s: float) -> StepMetrics:
        t = max(self.tokens, 1)
        fresh, stale = mismatch.summarize(self.fresh_gaps), mismatch.summarize(self.stale_gaps)
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
            logprob_gap=self.gap / max(self.measured or self.tokens, 1),
            grad_norm=grad_norm,
            tokens_per_s=tokens_per_s,
            tis_weight=self.tis_weight / t if self.tokens else 1.0,
            tis_truncated=self.tis_truncated / t,
            mismatch_mean=fresh.mean,
            mismatch_p99=fresh.p99,
            mismatch_max=fresh.max,
            mismatch_samples=sum(m.staleness == 0 for m in self.per_sample),
            mismatch_stale_mean=stale.mean,
            mismatch_stale_p99=stale.p99,
            mismatch_stale_samples=sum(m.staleness != 0 for m in self.per_sample),
            mismatch_over=self.over_tokens / max(self.measured or self.tokens, 1),
            mismatch_masked_tokens=self.masked_tokens,
            per_sample=self.per_sample,
        )
