"""Canary versions of a user's adapter (`eval.canary`): a new version earns its way to its user.

When the trainer publishes a new adapter version for a user, it becomes their *candidate* (store.canaries) instead of
their adapter: it serves a share of their turns (`eval.canary.share`, every k-th turn: never more), their current
adapter (the *incumbent*; none: the base model) the rest. The CanaryWorkflow of the user (id `canary/<pseudonym>`)
judges the turns served meanwhile, a round at a time: the other version answers each turn's prompt again (policy
pool), the judge compares the two answers in both orders (judge pool), and a sequential test (evals.canary) promotes
the candidate (it becomes the user's adapter) or rolls it back (the incumbent stays). Every round's verdicts and the
decision are events of that workflow (the activities' results), visible in the Temporal UI. A version trained while
a candidate is judged waits and is judged next, in the same workflow (continued as new per candidate).

What training does meanwhile: the trainer trains on from its newest version, with samples served by both arms, each
labelled with the version that served it (staleness counted in the user's adapter steps, importance-corrected as
every sample is). A rollback abandons the candidate's line: the user's adapter on the trainer goes back to the
incumbent's (store.canaries' go-back record, trainers.user_adapters.go_back), the version waiting behind the
candidate is dropped, so the incumbent's samples are on-policy again instead of stale for good. docs/evaluation.md,
"Canary versions".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType
from contracts.progress import Verdicts

CANARY_WORKFLOW = "CanaryWorkflow"
CANDIDATE_SIGNAL = "candidate"
"""Sent with the start (signal-with-start) each time a candidate is proposed: wakes a run about to end."""


def canary_workflow_id(tenant: str) -> str:
    return f"canary/{tenant}"


class Evidence(BaseModel):
    """The verdicts so far on one candidate: turns judged both ways, won both ways, lost both ways."""

    turns: int = 0
    wins: int = 0
    losses: int = 0


class CanaryInput(BaseModel):
    tenant: str
    """The user's pseudonym (contracts.chat.tenant_of): the histories never hold a user id."""
    version: int | None = None
    """The candidate being judged (None: the user's pending one, read at the first round)."""
    cursor: int = 0
    """Turns of its log already judged (a continued run goes on from there)."""
    evidence: Evidence = Field(default_factory=Evidence)
    policy_task_queue: str
    judge_task_queue: str
    share: float
    max_turns: int
    worse: float
    alpha: float
    beta: float
    wait_s: float


class RoundInput(BaseModel):
    tenant: str
    version: int | None
    cursor: int
    max_turns: int
    """Turns to answer at most this round (what the test still needs)."""
    wait_s: float
    """How long to wait for a first new turn before answering with none."""


class RoundAnswers(BaseModel):
    """What `canary_answers` left in the store for `canary_judge` (the answers themselves stay there)."""

    tenant: str
    status: Literal["judging", "no candidate"]
    """`no candidate`: the user has none pending (decided, or forgotten): the workflow ends."""
    version: int | None = None
    key: str = ""
    """Store key of this round's answer pairs (empty: no new turn came)."""
    cursor: int = 0
    """The log position after this round's turns."""
    turns: int = 0


class RoundVerdicts(BaseModel):
    turn_ids: list[str] = Field(default_factory=list)
    verdicts: list[Verdicts] = Field(default_factory=list)
    """Per turn: the candidate's answer ("new") against the incumbent's ("old"), both orders."""


class DecideInput(BaseModel):
    tenant: str
    version: int
    promote: bool
    reason: str
    evidence: Evidence


class Decision(BaseModel):
    tenant: str
    version: int
    verdict: Literal["promoted", "rolled back", "superseded"]
    reason: str
    evidence: Evidence
    next_version: int | None = None
    """A version that waited and is judged next."""


CANARY_ANSWERS = ActivityDef(
    name="canary_answers",
    input=RoundInput,
    output=RoundAnswers,
    start_to_close=timedelta(minutes=30),
    heartbeat=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=30), non_retryable=(ErrorType.INVALID_REQUEST,)),
)
CANARY_JUDGE = ActivityDef(
    name="canary_judge",
    input=RoundAnswers,
    output=RoundVerdicts,
    start_to_close=timedelta(minutes=30),
    heartbeat=timedelta(seconds=60),
    retry=Retry(maximum_interval=timedelta(seconds=30), non_retryable=(ErrorType.INVALID_REQUEST,)),
)
CANARY_DECIDE = ActivityDef(
    name="canary_decide",
    input=DecideInput,
    output=Decision,
    start_to_close=timedelta(minutes=5),
    retry=Retry(maximum_interval=timedelta(seconds=30)),
)
