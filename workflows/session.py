"""SessionWorkflow: one personal-agent chat session, durable.

Every chat request is an Update (with start) on this workflow. The handler runs
the `generate` activity on the policy pool and returns the completion. The
workflow keeps the ordered turn log (main-line and side turns) and pairs each
main-line turn t with its next state s_{t+1}: the last real message (a user
reply or a tool result) of the next main-line request. That pair is what the
judges score.

It ends on the client's session-done flag, on request (the `end` signal), or
after an idle timeout; a main-line turn that never got a next state is then
closed as `none` (binary RL would submit it with loss mask 0, OPD drops it).
Before Temporal's history limits it continues as new: finished turn records are
archived to Redis and the state carries on.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field

    from activities.generate import ChatSampling, ErrorType, GenerateInput, GenerateOutput
    from activities.learning import NextStateRef
    from activities.turn_log import ArchiveTurnsInput
    from api.session_identity import TurnType
    from openclaw_rl import redis_keys
    from openclaw_rl.temporal_client import POLICY_VERSION
    from policy_client.chat_output import ToolCall
    from rlmath.signals import Method
    from workflows.judge_turn import JudgeTurnInput, JudgeTurnWorkflow, LearningPlan, judge_workflow_id

SUMMARY_CHARS = 300
"""Turn records hold summaries, not messages: full data stays in Redis under the record's keys."""


class SessionErrorType:
    CLOSED = "SessionClosed"
    """The session has ended; the caller starts a new run."""
    ROLLING = "SessionRolling"
    """The workflow is continuing as new; the caller retries and reaches the new run."""


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


class NextState(BaseModel):
    role: str
    """`user` (a reply) or `tool` (a tool result); the judge is told which."""
    summary: str
    request_key: str
    """Redis key of the request that carried it; the full message is at `message_index`."""
    message_index: int


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
    next_state_status: Literal["pending", "paired", "none", "n/a"] = "n/a"
    """Main-line turns: pending until the next main-line request pairs them; `none` if the session ended first."""


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


def _clip(text: str | None, n: int = SUMMARY_CHARS) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 1] + "…"


# Unsandboxed: the sandbox's per-task cost showed up in chat latency under load;
# this code is deterministic by construction (no I/O, time or randomness but workflow.*).
@workflow.defn(name="SessionWorkflow", sandboxed=False)
class SessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        self.config = inp.config
        self.state = inp.state or SessionState(user_id=inp.user_id, session_id=inp.session_id)
        self.main_lock = asyncio.Lock()  # main-line turns of one session happen in order
        self.last_turn_at = workflow.now()  # idle detection
        self.in_flight = 0
        self.closed_reason: str | None = None
        self.rolling = False
        self.judge_starts = 0  # child workflows being started (must be in place before this run ends)

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionSummary:
        idle = timedelta(seconds=self.config.idle_timeout_s)
        while self.closed_reason is None:
            if self._should_roll():
                await self._continue_as_new(inp)
            # One timer per idle period, not one per turn: a turn only moves the deadline.
            left = (self.last_turn_at + idle - workflow.now()).total_seconds()
            if left <= 0 and self.in_flight == 0:
                self.closed_reason = "idle"
                break
            try:
                await workflow.wait_condition(lambda: self.closed_reason is not None or self._should_roll(), timeout=max(left, 1.0))
            except asyncio.TimeoutError:
                continue
        await workflow.wait_condition(workflow.all_handlers_finished)
        for rec in self.state.turns:
            if rec.next_state_status == "pending":
                rec.next_state_status = "none"
                if self.config.learning is not None and self.config.learning.method is Method.BINARY:
                    self._judge(rec)  # binary RL submits it with loss mask 0
        await workflow.wait_condition(lambda: self.judge_starts == 0)
        return self._summary()

    # ---- the chat turn ----------------------------------------------------
    @workflow.update
    async def turn(self, req: TurnRequest) -> TurnResult:
        self.last_turn_at = workflow.now()
        self.in_flight += 1
        try:
            if req.turn_type is TurnType.MAIN:
                async with self.main_lock:
                    return await self._run_turn(req)
            return await self._run_turn(req)
        finally:
            self.in_flight -= 1
            self.last_turn_at = workflow.now()

    @turn.validator
    def _accept_turn(self, req: TurnRequest) -> None:
        if self.closed_reason is not None:
            raise ApplicationError(f"session ended ({self.closed_reason})", type=SessionErrorType.CLOSED, non_retryable=True)
        if self.rolling:
            raise ApplicationError("session is continuing as new", type=SessionErrorType.ROLLING, non_retryable=True)

    async def _run_turn(self, req: TurnRequest) -> TurnResult:
        main = req.turn_type is TurnType.MAIN
        if main:
            self._pair_pending(req.next_state)
        rec = TurnRecord(
            index=self.state.next_index,
            turn_id=req.turn_id,
            turn_type=req.turn_type,
            side_kind=req.side_kind,
            received_at=req.received_at,
            started_at=workflow.now(),
            message_count=req.message_count,
            prompt_summary=_clip(req.prompt_summary),
            request_key=redis_keys.chat_request(req.turn_id),
            data_key=redis_keys.turn_data(req.turn_id),
        )
        self.state.next_index += 1
        self.state.turns.append(rec)
        if req.session_done:
            self.closed_reason = "client"
        try:
            out: GenerateOutput = await workflow.execute_activity(
                "generate",
                GenerateInput(turn_id=req.turn_id, sampling=req.sampling, stream=req.stream),
                result_type=GenerateOutput,
                task_queue=self.config.policy_task_queue,
                start_to_close_timeout=timedelta(seconds=self.config.generate_timeout_s),
                heartbeat_timeout=timedelta(seconds=self.config.generate_heartbeat_s),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=200),
                    maximum_interval=timedelta(seconds=5),
                    maximum_attempts=5,
                    non_retryable_error_types=[ErrorType.PROMPT_TOO_LONG, ErrorType.INVALID_REQUEST, ErrorType.REQUEST_MISSING],
                ),
            )
        except ActivityError as exc:
            rec.status, rec.finished_at = "failed", workflow.now()
            cause = exc.cause if isinstance(exc.cause, ApplicationError) else None
            rec.error = _clip(cause.message if cause else str(exc))
            raise ApplicationError(rec.error, type=cause.type if cause else ErrorType.POLICY_UNAVAILABLE, non_retryable=True) from exc
        rec.status, rec.finished_at = "done", workflow.now()
        rec.response_summary = _clip(out.content)
        rec.reasoning_summary = _clip(out.reasoning) if out.reasoning else None
        rec.tool_calls = [ToolCall(id=c.id, name=c.name, arguments=_clip(c.arguments)) for c in out.tool_calls]
        rec.finish_reason, rec.prompt_tokens, rec.completion_tokens = out.finish_reason, out.prompt_tokens, out.completion_tokens
        rec.weight_version, rec.attempts = out.weight_version, out.attempt
        if main:
            rec.next_state_status = "pending"
            self.state.main_turns += 1
        self._note_policy_version(out.weight_version)
        return TurnResult(turn_index=rec.index, turn_id=rec.turn_id, output=out)

    def _pair_pending(self, next_state: NextState | None) -> None:
        pending = next((r for r in reversed(self.state.turns) if r.turn_type is TurnType.MAIN and r.status == "done"), None)
        if pending is None or pending.next_state_status != "pending" or next_state is None:
            return
        pending.next_state = next_state
        pending.next_state_status = "paired"
        self.state.paired += 1
        self._judge(pending)

    def _judge(self, rec: TurnRecord) -> None:
        """Start judging the turn in the background: serving never waits for it."""
        plan = self.config.learning
        if plan is None:
            return
        ns = rec.next_state
        inp = JudgeTurnInput(
            plan=plan,
            session_key=workflow.info().workflow_id,
            user_id=self.state.user_id,
            session_id=self.state.session_id,
            turn_id=rec.turn_id,
            turn_index=rec.index,
            policy_version=rec.weight_version,
            next_state=NextStateRef(role=ns.role, request_key=ns.request_key, message_index=ns.message_index) if ns else None,
        )
        self.judge_starts += 1

        async def start() -> None:
            try:
                await workflow.start_child_workflow(
                    JudgeTurnWorkflow.run,
                    inp,
                    id=judge_workflow_id(inp.session_key, rec.index),
                    task_queue=self.config.workflow_task_queue,
                    parent_close_policy=ParentClosePolicy.ABANDON,
                    static_summary=f"judge turn {rec.index} of {self.state.session_id}",
                )
            except WorkflowAlreadyStartedError:
                pass  # started by an earlier run of this session
            finally:
                self.judge_starts -= 1

        asyncio.ensure_future(start())

    def _note_policy_version(self, version: str | None) -> None:
        if version is None or not version.isdigit() or int(version) == self.state.policy_version:
            return
        self.state.policy_version = int(version)
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(int(version))])

    # ---- ending and rolling over ------------------------------------------
    @workflow.signal
    def end(self, req: EndSession) -> None:
        if self.closed_reason is None:
            self.closed_reason = req.reason

    def _should_roll(self) -> bool:
        return self.in_flight == 0 and (len(self.state.turns) >= self.config.turns_per_run or workflow.info().is_continue_as_new_suggested())

    async def _continue_as_new(self, inp: SessionInput) -> None:
        self.rolling = True
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and self.judge_starts == 0)
        # Carry the last main-line turn if it still awaits its next state, and everything after it.
        keep_from = len(self.state.turns)
        for i in range(len(self.state.turns) - 1, -1, -1):
            rec = self.state.turns[i]
            if rec.turn_type is TurnType.MAIN:
                keep_from = i if rec.next_state_status == "pending" else keep_from
                break
        done, kept = self.state.turns[:keep_from], self.state.turns[keep_from:]
        if done:
            seg = ArchivedSegment(key=redis_keys.turn_log_segment(workflow.info().workflow_id, done[0].index), first_index=done[0].index, count=len(done))
            await workflow.execute_activity(
                "archive_turns",
                ArchiveTurnsInput(key=seg.key, records=[r.model_dump(mode="json") for r in done]),
                task_queue=self.config.workflow_task_queue,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            )
            self.state.archived.append(seg)
        self.state.turns = kept
        self.state.runs += 1
        workflow.continue_as_new(SessionInput(user_id=inp.user_id, session_id=inp.session_id, config=self.config, state=self.state))

    # ---- audit ------------------------------------------------------------
    @workflow.query
    def turns(self, page: TurnsPage) -> TurnsPageResult:
        # Turn indices run 0..next_index-1 with no gap: archived segments, then this run's records.
        lo, hi = page.offset, page.offset + page.limit
        segs = [s for s in self.state.archived if s.first_index < hi and s.first_index + s.count > lo]
        live = [r for r in self.state.turns if lo <= r.index < hi]
        return TurnsPageResult(total=self.state.next_index, archived=segs, turns=live, closed_reason=self.closed_reason, runs=self.state.runs)

    @workflow.query
    def summary(self) -> SessionSummary:
        return self._summary()

    def _summary(self) -> SessionSummary:
        return SessionSummary(
            user_id=self.state.user_id,
            session_id=self.state.session_id,
            turns=self.state.next_index,
            main_turns=self.state.main_turns,
            paired=self.state.paired,
            closed_reason=self.closed_reason,
            runs=self.state.runs,
        )
