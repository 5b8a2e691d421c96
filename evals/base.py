"""What every evaluation set is: cases (a chat to answer, and how to score its answer) and the metric they make."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class EvalSetError(ValueError):
    """A set cannot be evaluated: an unknown name, or its data is missing, empty or bad (the message says why)."""


@dataclass(frozen=True)
class EvalCase:
    messages: list[dict[str, str]]
    score: Callable[[str], float]
    """The answer's score, 0-1."""


@dataclass(frozen=True)
class EvalSet:
    name: str
    metric: str
    """What the mean of the cases' scores is called: `score` or `accuracy`."""
    cases: list[EvalCase]
