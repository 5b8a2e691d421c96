"""A user's progress report: did the version serving them get better *for them*?

A share of each user's judged main-line turns is held out of training (`eval.progress.held_out_share`): the turn
is served as usual, its prompt and served answer are kept (store.progress), and no sample is made of it. A report
has the version serving the user now answer those prompts again, and the judge compare each new answer with the one
served then, in both orders (position bias cancels). Turns first served by the user's first version give the
"against the first" comparison; those served by the version before the current one, "against the previous".
The ProgressReportWorkflow carries the user's pseudonym, counts and the report's summary; the answers and the report
live in the store (sealed like every other user content when encryption is on).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType

PROGRESS_REPORT_WORKFLOW = "ProgressReportWorkflow"
PROGRESS_ROUND_WORKFLOW = "ProgressRoundWorkflow"


def progress_schedule_id(policy: str) -> str:
    return f"progress/{policy}"


def report_workflow_id(tenant: str) -> str:
    """One report of a user at a time (a second start while one runs joins it)."""
    return f"progress/{tenant}"


class HeldOutTurn(BaseModel):
    """A main-line turn kept aside from training, as the store keeps it."""

    turn_id: str
    at: float
    """When it was held out (unix seconds)."""
    version: str
    """The weight version that served it (the user's adapter version under per-user adapters)."""
    messages: list[dict]
    """The conversation the answer was to (the turn's request, system and tool messages included)."""
    tools: list[dict] | None = None
    answer: str
    """The answer served then (its visible text: reasoning left out)."""


class ProgressInput(BaseModel):
    tenant: str
    """The user's pseudonym (contracts.chat.tenant_of): Temporal's histories never hold a user id."""
    max_turns: int = Field(32, ge=1)
    """Most held-out turns answered and judged (the newest ones)."""
    force: bool = False
    """Compute a report even when nothing changed since the last (a new version or new held-out turns)."""
    policy_task_queue: str
    judge_task_queue: str
    answer_timeout_s: float = 900.0


class AnswersRef(BaseModel):
    """What `progress_answers` left in the store for `progress_judge` (the answers themselves stay there)."""

    tenant: str
    key: str = ""
    """The store key of the new answers (empty: skipped)."""
    version: str | None = None
    """The version serving the user now, which wrote the new answers."""
    turns: int = 0
    """Held-out turns answered again."""
    skipped: str | None = None
    """Why no report was computed (no held-out turns yet, nothing new since the last report)."""


class Verdicts(BaseModel):
    """One held-out turn judged both ways: the new answer shown first, then second."""

    new_first: Literal["new", "old", "tie"]
    old_first: Literal["new", "old", "tie"]

    @property
    def score(self) -> float:
        """The new answer's share of the two verdicts: 1 (won both), 0.5 (split, or ties), 0 (lost both)."""
        points = {"new": 1.0, "tie": 0.5, "old": 0.0}
        return (points[self.new_first] + points[self.old_first]) / 2


class Comparison(BaseModel):
    """The serving version against one earlier version, on the held-out turns that version served."""

    against: Literal["first", "previous", "all"]
    version: str
    """The earlier version (for `all`: every earlier version, comma-separated)."""
    turns: int
    wins: int
    """Turns where the new answer won both orders."""
    ties: int
    """Turns split between the orders, or tied."""
    losses: int
    win_rate: float
    """Mean turn score: a win 1, a tie 1/2, a loss 0. Above 0.5: better for this user."""
    low: float
    high: float
    """The win rate's 95% interval (Wilson's, on the turn scores)."""


class ChangedTurn(BaseModel):
    """A turn whose answer changed most (the judge preferred one side in both orders), side by side."""

    turn_id: str
    prompt: str
    """The user's message it answered (cut to a few hundred characters)."""
    before_version: str
    before: str
    after: str
    score: float
    """1: the new answer won both orders; 0: the old one did."""


class ProgressReport(BaseModel):
    tenant: str
    """The user's pseudonym."""
    served_version: str
    at: float
    judge: str
    """Which judge compared the answers (`heuristic` cannot: every turn is then a tie, and the report says so)."""
    held_out_turns: int
    """Turns the user has held out of training."""
    judged: int
    """Held-out turns the report judged (the newest, at most `max_turns`, minus those the serving version served)."""
    comparisons: list[Comparison] = Field(default_factory=list)
    changed: list[ChangedTurn] = Field(default_factory=list)
    note: str | None = None
    """What the reader should know (too few turns for an interval to mean much, a judge that cannot compare)."""


class ProgressSummary(BaseModel):
    """What the workflow returns: the headline of the report (the report is in the store)."""

    tenant: str
    served_version: str | None = None
    judged: int = 0
    win_rate_vs_first: float | None = None
    win_rate_vs_previous: float | None = None
    skipped: str | None = None


class RoundInput(BaseModel):
    """One round of the progress schedule: a report for every user with held-out turns and news since the last."""

    max_turns: int = Field(32, ge=1)
    policy_task_queue: str
    judge_task_queue: str
    answer_timeout_s: float = 900.0
    parallel: int = Field(2, ge=1)


class RoundResult(BaseModel):
    users: int = 0
    reports: int = 0
    skipped: int = 0
    failed: int = 0


class UsersWithHeldOut(BaseModel):
    tenants: list[str] = Field(default_factory=list)
    """Pseudonyms of users with held-out turns (forgotten ones left out)."""


PROGRESS_ANSWERS = ActivityDef(
    name="progress_answers",
    input=ProgressInput,
    output=AnswersRef,
    start_to_close=timedelta(minutes=30),
    heartbeat=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=30), maximum_attempts=5, non_retryable=(ErrorType.INVALID_REQUEST,)),
)
PROGRESS_JUDGE = ActivityDef(
    name="progress_judge",
    input=AnswersRef,
    output=ProgressSummary,
    start_to_close=timedelta(minutes=30),
    heartbeat=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=30), maximum_attempts=5, non_retryable=(ErrorType.INVALID_REQUEST,)),
)
PROGRESS_USERS = ActivityDef(
    name="progress_users",
    input=RoundInput,
    output=UsersWithHeldOut,
    start_to_close=timedelta(seconds=120),
    retry=Retry(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
)
