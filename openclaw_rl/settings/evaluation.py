"""Held-out evaluation of policy versions, on a Temporal Schedule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator


class ProgressSettings(BaseModel):
    """Each user's progress report: the serving version against their first and previous versions, on their own
    held-out turns, judged pairwise (docs/evaluation.md, "Did it get better for me?")."""

    held_out_share: float = Field(0.0, ge=0.0, le=0.5)
    """The share of each user's judged main-line turns kept aside from training for their report (chosen by a hash
    of the user and turn ids: the same turns whatever process decides). 0: off, no report has turns to judge. A
    held-out turn is served as usual and never becomes a sample."""
    keep_turns: int = Field(200, ge=1, le=5000)
    """Held-out turns kept per user (the oldest go first)."""
    max_turns: int = Field(32, ge=1, le=1000)
    """The newest held-out turns each report answers again and judges (two judge calls each)."""
    every_s: float = Field(86400.0, ge=0)
    """How often the progress schedule reports on every user with held-out turns and news since their last report
    (a new version serving them, or new held-out turns). 0: no schedule (reports on demand only)."""
    keep_reports: int = Field(50, ge=1, le=1000)
    """Reports kept per user (the report's history and plot)."""


class CanarySettings(BaseModel):
    """Per-user adapter versions are candidates until they earn promotion: a new version serves a share of its
    user's turns, each such turn is answered again by the other version and the two answers judged pairwise (both
    orders), and a sequential test promotes the candidate or rolls it back (docs/evaluation.md, "Canary versions").
    Needs `training.adapters = per_user` and a judge that compares answers (an LLM judge)."""

    enabled: bool = False
    """Judge each user's new adapter versions before they serve all of the user's turns (off: straight to serving)."""
    share: float = Field(0.25, gt=0.0, le=0.5)
    """The share of the user's turns the candidate serves while it is judged (every k-th turn: never more)."""
    max_turns: int = Field(40, ge=2, le=1000)
    """Turns judged at most: undecided by then, the candidate is rolled back and the incumbent stays."""
    worse: float = Field(0.35, gt=0.0, lt=0.5)
    """The sequential test's hypotheses on the candidate's share of decisive verdicts: `worse` (it loses more than it
    wins) against `better` (1 - worse)."""
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    """The chance of promoting a candidate no better than `worse`: the bound on serving a version that lost."""
    beta: float = Field(0.10, gt=0.0, lt=0.5)
    """The chance of rolling back a candidate as good as `1 - worse`."""
    wait_s: float = Field(60.0, ge=1.0, le=3600.0)
    """How long one round waits for new turns to judge before the workflow looks again."""


class EvalSettings(BaseModel):
    """Evaluation of policy versions on held-out sets, on a Temporal Schedule (docs/evaluation.md)."""

    every_versions: int = Field(10, ge=0)
    """Evaluate the newest published version each time versions cross a multiple of N (N, 2N, ... or the first
    version past it). 0: off (`up` then deletes the schedule)."""
    check_every_s: float = Field(300.0, ge=1)
    """How often the schedule looks for a version to evaluate (a version crossed between two checks is evaluated at
    the next)."""
    personalization: list[Literal["student", "teacher"]] = Field(default_factory=lambda: ["student"])
    """The personalization benchmark's held-out problems to evaluate, by setting, with its rule scorer."""
    personalization_problems: int = Field(36, ge=1, le=100)
    """Held-out problems per personalization setting (the benchmark's table uses the first 36)."""
    user_sets: dict[str, Path] = Field(default_factory=dict)
    """Your own evaluation sets: name -> JSONL file (one `{"messages", "expected", "match"}` object a line)."""
    max_tokens: int = Field(256, ge=1)
    """Most tokens of each answer."""
    temperature: float = Field(0.0, ge=0, le=2)
    """Sampling temperature of the answers (0: greedy, the same answers for the same weights)."""
    concurrency: int = Field(8, ge=1, le=256)
    """Answers generated at once (the engine batches them), and episodes of an episode set running at once."""
    episodes: list[str] = Field(default_factory=list)
    """General-agent settings whose held-out tasks run as episodes (`episodes-<setting>`): `terminal` (the agents
    benchmark's counting tasks, count-0600 on), `toolcall` (its math problems, math/2400 on) or any setting named in
    `held_out_tasks`. Off by default: they hold sandboxes and the engine for whole episodes."""
    episode_tasks: int = Field(8, ge=1, le=1000)
    """Held-out tasks per episode set (the first ones of the setting's split)."""
    episode_samples: int = Field(1, ge=1, le=64)
    """Episodes per held-out task (at the setting's sampling temperature)."""
    held_out_tasks: dict[str, list[str]] = Field(default_factory=dict)
    """A setting's held-out task ids, in place of its built-in split (or for a setting without one)."""
    progress: ProgressSettings = Field(default_factory=ProgressSettings)
    canary: CanarySettings = Field(default_factory=CanarySettings)

    @field_validator("user_sets")
    @classmethod
    def _set_names(cls, sets: dict[str, Path]) -> dict[str, Path]:
        for name in sets:
            if not EVAL_SET_NAME.fullmatch(name):
                raise ValueError(f"eval set {name!r}: a name is lowercase letters, digits, - and _ (at most 40)")
        return sets


EVAL_SET_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
"""What a user's evaluation set may be called: it names TensorBoard tags and a search attribute's value."""
