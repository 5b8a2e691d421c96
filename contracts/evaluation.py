"""The EvaluationWorkflow: its input and result, and the policy pool's evaluation activities.

A set is named `<kind>-<name>`; its kind says how it loads (evals.registry). The workflow tells one kind apart:
`episodes-<setting>` (a general-agent setting's held-out tasks, run as episodes that publish no samples); every
other set is chats the policy answers and a scorer scores. Scores are kept per (version, set) in the
store; the workflow carries names, task ids and numbers only.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.episodes import EpisodeConfig
from contracts.errors import ErrorType

EVALUATION_WORKFLOW = "EvaluationWorkflow"
EPISODES_PREFIX = "episodes-"


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
    episodes: dict[str, EpisodeConfig] = Field(default_factory=dict)
    """How the episodes of each `episodes-<setting>` set run, by setting (workflow code reads no settings)."""
    episode_tasks: int = Field(8, ge=1)
    """Held-out tasks per episode set (the first ones of its split)."""
    episode_samples: int = Field(1, ge=1, le=64)
    """Episodes per held-out task."""
    episode_parallel: int = Field(8, ge=1)
    """Episodes running at once (whole tasks' groups; at least one group)."""


class EvalInput(BaseModel):
    config: EvalConfig
    version: int | None = None
    """A version to evaluate (`eval run --version`); None: the latest published one. Either way it must be served
    when its answers are generated (the schedule's cadence applies to scheduled runs only)."""
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
    last_evaluated: int | None = None
    """The newest version with any scores (None: none yet): the cadence counts from it."""
    not_evaluable: str | None = None
    """Why no set can evaluate what is served (per-user adapters: the served base never changes)."""


class EvaluateSetInput(BaseModel):
    set: str
    version: int


class EpisodeTasksInput(BaseModel):
    setting: str
    count: int = Field(ge=1)


class EpisodeTasks(BaseModel):
    task_ids: list[str]
    """The setting's first `count` held-out task ids."""


class SetScores(BaseModel):
    """One set's scores on one version: what the store keeps and the curves show."""

    set: str
    version: int
    metrics: dict[str, float]
    """`score` (a scorer's mean, 0-1), `accuracy` (the share of answers that match) or `success` (an episode set:
    the mean outcome of its episodes); which one is the set's kind's choice."""
    count: int
    """Items answered and scored (an episode set: episodes finished)."""
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
EVAL_EPISODE_TASKS = ActivityDef(
    name="eval_episode_tasks",
    input=EpisodeTasksInput,
    output=EpisodeTasks,
    start_to_close=timedelta(seconds=60),
    retry=Retry(
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=5,
        non_retryable=(ErrorType.INVALID_REQUEST, ErrorType.EVAL_SET_INVALID),
    ),
)
RECORD_SCORES = ActivityDef(
    name="record_eval_scores",
    input=SetScores,
    output=RecordResult,
    start_to_close=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
)
