"""Step-wise rewards and advantages of general-agent episodes (paper section 4.4, the reference's rules).

Pure Python (no torch, no I/O) so the TaskGroupWorkflow computes them in
workflow code. A step's reward is the episode's outcome plus the mean of the
step's valid PRM votes; rewards are standardised within buckets of the same
task group and step index; the normalised value is the advantage of every token
of that step's response.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

STD_EPS = 1e-6
"""A bucket whose rewards spread less than this is constant: it carries no signal and is dropped."""


@dataclass(frozen=True)
class StepAdvantage:
    episode: int
    """Index of the episode in its group."""
    step: int
    reward: float
    advantage: float


def step_reward(outcome: float, votes: Sequence[int | None]) -> float:
    """o + mean of the valid votes (+1 / -1); a step without a valid vote gets the outcome alone."""
    valid = [v for v in votes if v in (1, -1)]
    return outcome + (sum(valid) / len(valid) if valid else 0.0)


def group_advantages(rewards: Sequence[Sequence[float]]) -> list[StepAdvantage]:
    """Standardise step rewards within (group, step index) buckets.

    `rewards[e][t]` is the reward of step t of episode e of one task group; episodes
    may have different lengths. A bucket with one sample keeps its raw reward; a
    bucket whose rewards are all equal is dropped (no step of it is returned);
    otherwise each reward becomes (r - mean) / std with the population std.
    Results are ordered by episode, then step.
    """
    buckets: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for e, steps in enumerate(rewards):
        for t, r in enumerate(steps):
            buckets[t].append((e, r))
    out: list[StepAdvantage] = []
    for t, members in buckets.items():
        values = [r for _, r in members]
        if len(values) == 1:
            out.append(StepAdvantage(members[0][0], t, values[0], values[0]))
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if std < STD_EPS:
            continue
        out += [StepAdvantage(e, t, r, (r - mean) / std) for e, r in members]
    return sorted(out, key=lambda a: (a.episode, a.step))
