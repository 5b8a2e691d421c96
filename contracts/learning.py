"""Judging a turn: the JudgeTurnWorkflow, its votes, the teacher pass and the published sample."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType

JUDGE_TURN_WORKFLOW = "JudgeTurnWorkflow"


class Method(StrEnum):
    BINARY = "binary"
    OPD = "opd"
    COMBINED = "combined"


class NextState(BaseModel):
    """s_{t+1} of a turn: where its message is in Redis, and a summary for the turn log."""

    role: str
    """`user` (a reply) or `tool` (a tool result); the judge is told which."""
    request_key: str
    """Redis key of the request that carried it; the full message is at `message_index`."""
    message_index: int
    summary: str = ""


class LearningPlan(BaseModel):
    """Fixed when the session starts, like the rest of its config."""

    method: Method
    prm_votes: int
    hint_votes: int
    judge_name: str
    w_binary: float
    w_opd: float
    source: str
    judge_task_queue: str
    policy_task_queue: str
    vote_timeout_s: float
    judge_and_publish: bool = False
    """A judge votes and publishes in one activity (`judge_and_publish`: one billable action where two were), unless
    a hint is accepted (its teacher pass on the policy pool comes between). Set for sessions started since; a plan
    without it (a session started before) keeps the two activities, so the judge workflows it starts replay on
    either build without a patch marker (whose first use is an upsert, one more action)."""


class JudgeSummary(BaseModel):
    """How a turn was judged (kept in the sample, the record and the audit)."""

    judge: str
    prm_votes: list[int | None] = Field(default_factory=list)
    eval_score: int | None = None
    hint: str | None = None
    hint_votes: int = 0
    failed_votes: int = 0
    representative: str | None = None
    """The first raw PRM output agreeing with the majority (clipped)."""


class JudgeTurnInput(BaseModel):
    plan: LearningPlan
    session_key: str
    user_id: str
    session_id: str
    turn_id: str
    turn_index: int
    policy_version: str | None
    next_state: NextState | None
    """None: the session ended before this turn got a next state."""


class VoteResult(BaseModel):
    kind: Literal["prm", "hint"]
    vote: int
    score: int | None
    hint: str | None = None
    raw: str


class VotesInput(BaseModel):
    """All of a turn's votes in one activity (`judge_votes`): one billable action where m votes were m."""

    turn_id: str
    next_state: NextState
    prm: int = Field(0, ge=0)
    hints: int = Field(0, ge=0)
    vote_timeout_s: float = Field(gt=0)
    """Each vote's bound, as one vote activity's was."""
    attempts: int = Field(3, ge=1)
    """Tries per vote before it counts as no vote (as one vote activity's retries did)."""


class Votes(BaseModel):
    prm: list[VoteResult | None]
    """One per PRM vote, in order; None: the vote failed every try (it counts as no vote)."""
    hints: list[VoteResult | None]


class TeacherInput(BaseModel):
    turn_id: str
    hint: str
    user_id: str | None = None
    """Whose turn: with per-user adapters the teacher is that user's own policy (None: the shared policy)."""


class TeacherResult(BaseModel):
    key: str
    tokens: int
    mean_logprob: float


class PublishInput(BaseModel):
    sample_id: str
    session_key: str
    """Session workflow id (the at-least-one rule is per session)."""
    source: str
    method: Method
    user_id: str
    session_id: str
    turn_id: str
    turn_index: int
    policy_version: str | None
    has_next_state: bool
    judge: JudgeSummary
    teacher_key: str | None = None
    w_binary: float = 1.0
    w_opd: float = 1.0


class PublishResult(BaseModel):
    published: bool
    """A sample entered the stream (False: dropped by the rules, or already published)."""
    duplicate: bool = False
    reward: float | None = None
    loss_mask: int | None = None
    reason: str
    advantage_mean: float | None = None
    advantage_min: float | None = None
    advantage_max: float | None = None
    tokens: int = 0


class JudgementRecord(BaseModel):
    """What `publish_sample` writes for a judged turn (record stream, the audit key, the JSONL mirror)."""

    sample_id: str
    user_id: str
    session_id: str
    turn_id: str
    turn_index: int
    policy_version: str | None
    method: Method
    judge: JudgeSummary
    result: PublishResult


class JudgeOutcome(BaseModel):
    judge: JudgeSummary
    teacher: TeacherResult | None = None
    result: PublishResult


class JudgeAndPublishInput(BaseModel):
    """A judge's votes, then the sample they make, in one activity (`judge_and_publish`)."""

    votes: VotesInput
    sample: PublishInput
    """What `publish_sample` takes; its `judge` names the judge, the activity fills in the votes."""


class JudgedSample(BaseModel):
    judge: JudgeSummary
    result: PublishResult | None
    """None: a hint was accepted, so nothing is published yet (its teacher log-probs come first, then
    `publish_sample`)."""


def session_key(workflow_id: str, first_run_id: str) -> str:
    """One run chain of a session workflow (a run and its continuations as new).

    A session id that comes back after its session ended starts a new chain under the same workflow id; its turn
    indices start again at 0. Keying judges, samples and archives by the chain keeps the two apart.
    """
    return f"{workflow_id}@{first_run_id}"


def judge_workflow_id(session_key: str, turn_index: int) -> str:
    return f"judge/{session_key}/{turn_index}"


def sample_id(session_key: str, turn_index: int) -> str:
    """One per turn, ever: the idempotency key of its sample."""
    return f"{session_key}#{turn_index}"


_VOTE_RETRY = Retry(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable=(ErrorType.TURN_DATA_MISSING,),
)
_UNTIL_IT_LANDS = Retry(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,
    non_retryable=(ErrorType.TURN_DATA_MISSING,),
)
"""A sample's publication: until it lands, however long the store is down (giving up would lose the sample;
publishing is idempotent, so no double)."""
JUDGE_HEARTBEAT = timedelta(seconds=30)
"""Three of the votes' heartbeats (activities.learning beats every 10 s): a judge worker killed mid-vote has its
votes asked again after 30 s (60 s before, for no gain)."""
# Vote and teacher timeouts are `learning.vote_timeout_s`, passed by the workflow at the call.
JUDGE_VOTES = ActivityDef(
    "judge_votes",
    VotesInput,
    Votes,
    heartbeat=JUDGE_HEARTBEAT,
    # Each vote retries itself inside; these retries are for the activity (a worker lost mid-way, the store down).
    retry=Retry(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=3,
        non_retryable=(ErrorType.TURN_DATA_MISSING,),
    ),
)
"""Every PRM and hint vote of a turn at once, in parallel requests to the judge, each retried on its own."""
TEACHER_LOGPROBS = ActivityDef("teacher_logprobs", TeacherInput, TeacherResult, retry=_VOTE_RETRY)
"""The response scored under the hint-enhanced context (policy pool)."""
PUBLISH_SAMPLE = ActivityDef(
    "publish_sample",
    PublishInput,
    PublishResult,
    start_to_close=timedelta(seconds=60),
    retry=_UNTIL_IT_LANDS,
)
JUDGE_AND_PUBLISH = ActivityDef(
    "judge_and_publish",
    JudgeAndPublishInput,
    JudgedSample,
    heartbeat=JUDGE_HEARTBEAT,
    # A vote that fails is no vote, so only a lost worker or the store down fails it; a try after one votes again
    # (the sample is published once, whichever try's votes make it).
    retry=_UNTIL_IT_LANDS,
)
"""A turn's votes and its sample in one activity (judge pool), when its plan says so and no hint is accepted."""
