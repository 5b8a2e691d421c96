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
from datetime import timedelta

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import ActivityError, ApplicationError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from contracts.chat import GENERATE, GenerateInput, GenerateOutput, ToolCall, TurnType, tenant_of
    from contracts.errors import ErrorType
    from contracts.learning import JudgeTurnInput, Method, judge_workflow_id, session_key
    from contracts.priorities import Rank
    from contracts.session import (
        ARCHIVE_TURNS,
        SESSION_WORKFLOW,
        ArchivedSegment,
        ArchiveTurnsInput,
        EndSession,
        SessionInput,
        SessionState,
        SessionSummary,
        TurnRecord,
        TurnRequest,
        TurnResult,
        TurnsPage,
        TurnsPageResult,
    )
    from contracts.summary import clip
    from openclaw_rl.search_attributes import POLICY_VERSION
    from store import keys
    from workflows.activity_calls import execute
    from workflows.judge_turn import JudgeTurnWorkflow


RUN_SCOPED_KEYS = "run-scoped-session-keys"
"""Patch marker: a session id reused after its session ended must not reuse the old run's sample and judge ids."""


# Unsandboxed: the sandbox's per-task cost showed up in chat latency under load;
# this code is deterministic by construction (no I/O, time or randomness but workflow.*).
@workflow.defn(name=SESSION_WORKFLOW, sandboxed=False)
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
        self._key: str | None = None

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
                await workflow.wait_condition(
                    lambda: self.closed_reason is not None or self._should_roll(), timeout=max(left, 1.0)
                )
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
            raise ApplicationError(
                f"session ended ({self.closed_reason})", type=ErrorType.SESSION_CLOSED, non_retryable=True
            )
        if self.rolling:
            raise ApplicationError("session is continuing as new", type=ErrorType.SESSION_ROLLING, non_retryable=True)

    async def _run_turn(self, req: TurnRequest) -> TurnResult:
        main = req.turn_type is TurnType.MAIN
        if main:
            self._pair_pending(req)
        rec = TurnRecord(
            index=self.state.next_index,
            turn_id=req.turn_id,
            turn_type=req.turn_type,
            side_kind=req.side_kind,
            received_at=req.received_at,
            started_at=workflow.now(),
            message_count=req.message_count,
            prompt_summary=clip(req.prompt_summary),
            request_key=keys.chat_request(req.turn_id),
            data_key=keys.turn_data(req.turn_id),
            request_digest=req.request_digest,
        )
        self.state.next_index += 1
        self.state.turns.append(rec)
        if req.session_done:
            self.closed_reason = "client"
        try:
            out: GenerateOutput = await execute(
                GENERATE,
                GenerateInput(
                    turn_id=req.turn_id, sampling=req.sampling, stream=req.stream, tenant=tenant_of(self.state.user_id)
                ),
                task_queue=self.config.policy_task_queue,
                start_to_close=timedelta(seconds=self.config.generate_timeout_s),
                heartbeat=timedelta(seconds=self.config.generate_heartbeat_s),
            )
        except ActivityError as exc:
            rec.status, rec.finished_at = "failed", workflow.now()
            cause = exc.cause if isinstance(exc.cause, ApplicationError) else None
            rec.error = clip(cause.message if cause else str(exc))
            raise ApplicationError(
                rec.error, type=cause.type if cause else ErrorType.POLICY_UNAVAILABLE, non_retryable=True
            ) from exc
        rec.status, rec.finished_at = "done", workflow.now()
        rec.response_summary = clip(out.content)
        rec.reasoning_summary = clip(out.reasoning) if out.reasoning else None
        rec.tool_calls = [ToolCall(id=c.id, name=c.name, arguments=clip(c.arguments)) for c in out.tool_calls]
        rec.finish_reason, rec.prompt_tokens, rec.completion_tokens = (
            out.finish_reason,
            out.prompt_tokens,
            out.completion_tokens,
        )
        rec.weight_version, rec.attempts = out.weight_version, out.attempt
        if main:
            rec.next_state_status = "pending"
            self.state.main_turns += 1
        self._note_policy_version(out.weight_version)
        return TurnResult(turn_index=rec.index, turn_id=rec.turn_id, output=out)

    def _pair_pending(self, req: TurnRequest) -> None:
        pending = next(
            (r for r in reversed(self.state.turns) if r.turn_type is TurnType.MAIN and r.status == "done"), None
        )
        next_state = req.next_state
        if pending is None or pending.next_state_status != "pending" or next_state is None:
            return
        if (
            req.request_digest is not None
            and req.request_digest == pending.request_digest
            and workflow.patched("retried-request-does-not-pair")
        ):
            # The same request again: the client retried (its answer was lost), so this is no reply to that answer.
            pending.next_state_status = "retried"
            if self.config.learning is not None and self.config.learning.method is Method.BINARY:
                self._judge(pending)  # submitted with loss mask 0, as an unpaired turn at the session's end
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
        inp = JudgeTurnInput(
            plan=plan,
            session_key=self._session_key(),
            user_id=self.state.user_id,
            session_id=self.state.session_id,
            turn_id=rec.turn_id,
            turn_index=rec.index,
            policy_version=rec.weight_version,
            next_state=rec.next_state,
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
                    priority=Priority(priority_key=Rank.JUDGE),  # the user's fairness key: inherited
                )
            except WorkflowAlreadyStartedError:
                pass  # started by an earlier run of this session
            finally:
                self.judge_starts -= 1

        asyncio.ensure_future(start())

    def _session_key(self) -> str:
        """Judges, samples and archived turn records are keyed by this run chain, not only the workflow id.

        Runs started before this existed keep the bare workflow id (what their histories recorded).
        """
        if self._key is None:
            info = workflow.info()
            chain = workflow.patched(RUN_SCOPED_KEYS)
            self._key = session_key(info.workflow_id, info.first_execution_run_id) if chain else info.workflow_id
        return self._key

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
        return self.in_flight == 0 and (
            len(self.state.turns) >= self.config.turns_per_run or workflow.info().is_continue_as_new_suggested()
        )

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
            seg = ArchivedSegment(
                key=keys.turn_log_segment(self._session_key(), done[0].index),
                first_index=done[0].index,
                count=len(done),
            )
            await execute(
                ARCHIVE_TURNS,
                ArchiveTurnsInput(key=seg.key, records=[r.model_dump(mode="json") for r in done]),
                task_queue=self.config.workflow_task_queue,
            )
            self.state.archived.append(seg)
        self.state.turns = kept
        self.state.runs += 1
        workflow.continue_as_new(
            SessionInput(user_id=inp.user_id, session_id=inp.session_id, config=self.config, state=self.state)
        )

    # ---- audit ------------------------------------------------------------
    @workflow.query
    def turns(self, page: TurnsPage) -> TurnsPageResult:
        # Turn indices run 0..next_index-1 with no gap: archived segments, then this run's records.
        lo, hi = page.offset, page.offset + page.limit
        segs = [s for s in self.state.archived if s.first_index < hi and s.first_index + s.count > lo]
        live = [r for r in self.state.turns if lo <= r.index < hi]
        return TurnsPageResult(
            total=self.state.next_index,
            archived=segs,
            turns=live,
            closed_reason=self.closed_reason,
            runs=self.state.runs,
        )

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
