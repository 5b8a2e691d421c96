"""The EvaluationWorkflow: its input and result, and the policy pool's evaluation activities.

A set is named `personalization-student`, `personalization-teacher` (the personalization benchmark's held-out
problems) or `user-<name>` (a user's own JSONL set, `eval.user_sets`). Scores are kept per (version, set) in the
store; the workflow carries names and numbers only.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType

EVALUATION_WORKFLOW = "EvaluationWorkflow"
PERSONALIZATION_PREFIX = "personalization-"
USER_PREFIX = "user-"


def eval_schedule_id(policy: str) -> str:
    return f"eval/{policy}"


class EvalConfig(BaseModel):
    """What to evaluate and how, from `settings.eval` (control.evaluation)."""

    sets: list[str]
    """Set names, in the order they are evaluated."""
    every_versions: int = Field(ge=0)
    """Only versions that are multiples of this (0: any version asked for)."""
    policy_task_queue: str
    """Where the evaluation activities run (they generate through the policy client)."""
    generate_timeout_s: float = 900.0


class EvalInput(BaseModel):
    config: EvalConfig
    version: int | None = None
    """A version to evaluate (`eval run --version`); None: the latest published one. Either way it must be served
    when its answers are generated, and a multiple of `every_versions`."""
    skip_base: bool = True
    """The base model (version 0) is evaluated only when asked for by number: the schedule's first look at a fresh
    stack would otherwise evaluate it."""


class PlanInput(BaseModel):
    sets: list[str]
    version: int | None = None


class EvalPlan(BaseModel):
    version: int
    """The version asked for, else the latest published one."""
    sets: list[str] = Field(default_factory=list)
    """The sets not yet evaluated on it."""


class EvaluateSetInput(BaseModel):
    set: str
    version: int


class SetScores(BaseModel):
    """One set's scores on one version: what the store keeps and the curves show."""

    set: str
    version: int
    metrics: dict[str, float]
    """`score` (personalization: the rule scorer's mean, 0-1) or `accuracy` (a user's set: the share matched)."""
    count: int
    """Items answered and scored."""
    served_version: str | None = None
    """The weight version the policy server reported for the answers."""
    at: float = 0.0
    """When it was recorded (unix seconds)."""


class RecordResult(BaseModel):
    recorded: bool
    """False: this version's set had been recorded already (its first scores are kept)."""


class EvalResult(BaseModel):
    version: int | None = None
    scores: list[SetScores] = Field(default_factory=list)
    skipped: str | None = None
    """Why nothing was evaluated: not a multiple, already evaluated, the version moved on, nothing published."""


EVAL_PLAN = ActivityDef(
    name="eval_plan",
    input=PlanInput,
    output=EvalPlan,
    start_to_close=timedelta(seconds=30),
    retry=Retry(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
)
EVALUATE_SET = ActivityDef(
    name="evaluate_set",
    input=EvaluateSetInput,
    output=SetScores,
    start_to_close=timedelta(minutes=30),
    heartbeat=timedelta(seconds=60),
    retry=Retry(
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=5,
        # A bad set file or a version the servers no longer serve: trying again gives the same answer.
        non_retryable=(ErrorType.INVALID_REQUEST, ErrorType.EVAL_SET_INVALID, ErrorType.EVAL_VERSION_MOVED),
    ),
)
RECORD_SCORES = ActivityDef(
    name="record_eval_scores",
    input=SetScores,
    output=RecordResult,
    start_to_close=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
)
