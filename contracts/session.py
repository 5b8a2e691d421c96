"""SessionWorkflow's input, state, update, signal and queries, and its bookkeeping activity."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.chat import ChatSampling, GenerateOutput, ToolCall, TurnType
from contracts.learning import LearningPlan, NextState

SESSION_WORKFLOW = "SessionWorkflow"


class SessionConfig(BaseModel):
    """Fixed when the session starts (workflow code cannot read settings itself)."""

    policy_task_queue: str
    workflow_task_queue: str
    idle_timeout_s: float
    turns_per_run: int
    generate_heartbeat_s: float
    generate_timeout_s: float
    learning: LearningPlan | None = None
    """None: turns are recorded but not judged."""


class TurnRequest(BaseModel):
    turn_id: str
    turn_type: TurnType
    side_kind: str | None = None
    sampling: ChatSampling
    stream: bool = True
    prompt_summary: str
    message_count: int
    next_state: NextState | None = None
    """For a main-line request: its last real message, the next state of the pending turn."""
    session_done: bool = False
    received_at: datetime
    request_digest: str | None = None
    """Digest of the request's messages and tools: a main-line request identical to the pending turn's own is the
    client retrying it (its answer was lost), not the user's reply, so it does not pair."""


class TurnRecord(BaseModel):
    index: int
    turn_id: str
    turn_type: TurnType
    side_kind: str | None = None
    status: Literal["generating", "done", "failed"] = "generating"
    error: str | None = None
    received_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    message_count: int
    prompt_summary: str
    response_summary: str = ""
    reasoning_summary: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    weight_version: str | None = None
    attempts: int = 0
    request_key: str
    data_key: str
    """Redis hash with prompt ids, response ids and rollout log-probs."""
    next_state: NextState | None = None
    next_state_status: Literal["pending", "paired", "none", "retried", "n/a"] = "n/a"
    """Main-line turns: pending until the next main-line request pairs them; `none` if the session ended first;
    `retried` if the client sent the same request again (the answer never reached it), so no reply can follow."""
    request_digest: str | None = None


class ArchivedSegment(BaseModel):
    key: str
    first_index: int
    count: int


class SessionState(BaseModel):
    user_id: str
    session_id: str
    next_index: int = 0
    turns: list[TurnRecord] = Field(default_factory=list)
    """Records of this run (plus any carried over); earlier ones are in `archived`."""
    archived: list[ArchivedSegment] = Field(default_factory=list)
    runs: int = 1
    main_turns: int = 0
    paired: int = 0
    policy_version: int | None = None


class SessionInput(BaseModel):
    user_id: str
    session_id: str
    config: SessionConfig
    state: SessionState | None = None


class TurnResult(BaseModel):
    turn_index: int
    turn_id: str
    output: GenerateOutput


class EndSession(BaseModel):
    reason: str = "requested"


class SessionSummary(BaseModel):
    user_id: str
    session_id: str
    turns: int
    main_turns: int
    paired: int
    closed_reason: str | None
    runs: int


class TurnsPage(BaseModel):
    offset: int = Field(0, ge=0)
    limit: int = Field(50, ge=1, le=500)


class TurnsPageResult(BaseModel):
    total: int
    archived: list[ArchivedSegment]
    """Segments overlapping the page that live in Redis (the caller reads them)."""
    turns: list[TurnRecord]
    closed_reason: str | None
    runs: int = 1
    """Workflow runs so far (continue-as-new starts a new one)."""


class ArchiveTurnsInput(BaseModel):
    key: str
    records: list[dict[str, Any]]
    """TurnRecord dumps, in index order."""


ARCHIVE_TURNS = ActivityDef(
    "archive_turns",
    ArchiveTurnsInput,
    None,
    start_to_close=timedelta(seconds=30),
    retry=Retry(maximum_interval=timedelta(seconds=10)),
)
