"""records/steps.jsonl: one line per train step (the trainer pool writes it), what the curves are drawn from.

Each line holds the step's trainer metrics (loss, KL, entropy, clip fraction, ...) and, per sample stream, what
its samples brought to the batch: rewards, advantages, and for samples with teacher log-probs (OPD) how far the
teacher stood from the rollout. The trainer pool writes a line after each step it ran. A step trained again after
a crash (its version was lost before a durable checkpoint held it) writes its version's line again: readers keep
the last line per version (`read_steps`).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import structlog
from pydantic import BaseModel

from contracts.training import StepMetrics, StepSummary
from store.samples import TrainingSample

STEP_LOG = "steps.jsonl"

log = structlog.get_logger(__name__)


class SourceStats(BaseModel):
    """One sample stream's share of a batch."""

    samples: int
    learned: int
    """Samples with loss mask 1 (the others are submitted but never learned from)."""
    tokens: int
    """Learned response tokens."""
    reward_mean: float
    advantage_mean: float
    """Over learned tokens."""
    advantage_std: float
    advantage_abs_mean: float
    advantage_positive: float
    """Share of learned tokens with a positive advantage."""
    staleness_mean: float
    """Versions between the one that generated a sample and the one trained from."""
    teacher_samples: int = 0
    teacher_gap_mean: float | None = None
    """Mean teacher - rollout log-prob over the tokens of samples with teacher log-probs (OPD's signal)."""
    teacher_gap_positive: float | None = None
    """Share of those tokens the teacher likes more than the rollout did."""


class TrainStepLine(BaseModel):
    time: float
    version: int
    """The version the step produced."""
    trained: int
    dropped_stale: int
    metrics: StepMetrics
    sources: dict[str, SourceStats]


def source_stats(samples: list[TrainingSample], trained_from: int) -> dict[str, SourceStats]:
    by: dict[str, list[TrainingSample]] = {}
    for s in samples:
        by.setdefault(s.source, []).append(s)
    return {src: _stats(group, trained_from) for src, group in sorted(by.items())}


def _stats(group: list[TrainingSample], trained_from: int) -> SourceStats:
    learned = [s for s in group if s.loss_mask > 0]
    adv = [a for s in learned for a in s.advantages]
    gaps = [
        t - r
        for s in learned
        if s.teacher_logprobs is not None
        for t, r in zip(s.teacher_logprobs, s.rollout_logprobs, strict=False)
    ]
    stale = [trained_from - int(s.policy_version) for s in group if (s.policy_version or "").isdigit()]
    return SourceStats(
        samples=len(group),
        learned=len(learned),
        tokens=len(adv),
        reward_mean=statistics.fmean(s.reward for s in group),
        advantage_mean=statistics.fmean(adv) if adv else 0.0,
        advantage_std=statistics.pstdev(adv) if adv else 0.0,
        advantage_abs_mean=statistics.fmean(abs(a) for a in adv) if adv else 0.0,
        advantage_positive=sum(a > 0 for a in adv) / len(adv) if adv else 0.0,
        staleness_mean=statistics.fmean(stale) if stale else 0.0,
        teacher_samples=sum(s.teacher_logprobs is not None for s in learned),
        teacher_gap_mean=statistics.fmean(gaps) if gaps else None,
        teacher_gap_positive=sum(g > 0 for g in gaps) / len(gaps) if gaps else None,
    )


def record_train_step(
    records_dir: Path, summary: StepSummary, samples: list[TrainingSample], trained_from: int
) -> TrainStepLine | None:
    """Append the step's line (a step that ran: `summary.metrics` is set); the line, for the curves."""
    if summary.metrics is None:
        return None
    record = TrainStepLine(
        time=time.time(),
        version=summary.version,
        trained=summary.trained,
        dropped_stale=summary.dropped_stale,
        metrics=summary.metrics,
        sources=source_stats(samples, trained_from),
    )
    path = Path(records_dir) / STEP_LOG
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(record.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:  # a curve's point, not training's state: the step stands without it
        log.warning("the step's metrics line was not written", path=str(path), error=str(exc))
    return record


def read_steps(records_dir: Path) -> list[TrainStepLine]:
    """Every version's last line, by version (a torn last line, from a crash mid-write, is skipped)."""
    path = Path(records_dir) / STEP_LOG
    out: dict[int, TrainStepLine] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            rec = TrainStepLine.model_validate(json.loads(line))
        except ValueError:
            continue
        out[rec.version] = rec
    return [out[v] for v in sorted(out)]
