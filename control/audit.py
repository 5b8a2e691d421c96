"""Reading sessions and their turn logs back: shared by the REST audit routes and the CLI."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from contracts.learning import JudgementRecord
from contracts.session import TurnRecord, TurnsPage, TurnsPageResult
from contracts.training import SampleMismatch
from control.sessions import find_session, session_handle, user_query
from openclaw_rl.search_attributes import POLICY_VERSION, SESSION_ID, USER_ID
from store.client import Store
from workflows.session import SessionWorkflow


class SessionInfo(BaseModel):
    session_id: str
    user_id: str
    workflow_id: str
    run_id: str
    status: str
    started_at: datetime | None
    closed_at: datetime | None
    policy_version: int | None


class AuditedTurn(TurnRecord):
    judgement: JudgementRecord | None = None
    """None until the turn is judged (after its next state arrives)."""
    mismatch: SampleMismatch | None = None
    """Once its sample is trained: the train-inference mismatch the step measured on it (|trainer - engine|
    log-prob over its learned tokens, and whether the trainer held the weights that served it). None before, or
    once expired (`redis.data_ttl_s`)."""


class TurnLog(BaseModel):
    session_id: str
    workflow_id: str
    status: str
    total: int
    offset: int
    closed_reason: str | None
    runs: int
    turns: list[AuditedTurn]


class SessionNotFound(LookupError):
    pass


async def list_sessions(
    client: Client, user_id: str | None = None, limit: int = 50, store: Store | None = None
) -> list[SessionInfo]:
    """`user_id`: that user's sessions only (shown under that id). Otherwise each session's `OpenclawUser` (a
    pseudonym; the user id on sessions started before ids were pseudonyms) is shown as the user's name through the
    store's name records when `store` is given and the user still exists, else as it is."""
    # A session that continued as new has one closed run per segment: show the live one only.
    query = "WorkflowType = 'SessionWorkflow' AND ExecutionStatus != 'ContinuedAsNew'"
    if user_id is not None:
        query += f" AND {user_query(user_id)}"
    out: list[SessionInfo] = []
    seen: set[str] = set()
    async for wf in client.list_workflows(query, limit=limit * 2):
        if wf.id in seen or len(out) >= limit:  # an ended session that was started again: newest run only
            continue
        seen.add(wf.id)
        attrs = wf.typed_search_attributes
        out.append(
            SessionInfo(
                session_id=attrs.get(SESSION_ID) or wf.id,
                user_id=user_id if user_id is not None else attrs.get(USER_ID) or "",
                workflow_id=wf.id,
                run_id=wf.run_id,
                status=wf.status.name.lower() if wf.status else "unknown",
                started_at=wf.start_time,
                closed_at=wf.close_time,
                policy_version=attrs.get(POLICY_VERSION),
            )
        )
    if user_id is None and store is not None:
        names = await store.users.names_of([s.user_id for s in out])
        out = [s.model_copy(update={"user_id": names.get(s.user_id, s.user_id)}) for s in out]
    return out


async def session_turns(
    client: Client,
    store: Store,
    user_id: str,
    session_id: str,
    offset: int = 0,
    limit: int = 50,
    workflow_id: str | None = None,
) -> TurnLog:
    """`workflow_id`: that one of the user's session workflows (one of `list_sessions`); None: where the session
    lives (control.sessions.find_session)."""
    wf_id = workflow_id or await find_session(client, user_id, session_id)
    handle = client.get_workflow_handle(wf_id)
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFound(session_id) from None
        raise
    page: TurnsPageResult = await handle.query(SessionWorkflow.turns, TurnsPage(offset=offset, limit=limit))
    records = list(page.turns) + await store.turn_log.load([seg.key for seg in page.archived])
    records = sorted(
        {r.index: r for r in records if offset <= r.index < offset + limit}.values(), key=lambda r: r.index
    )
    judged = await store.judgements.of_turns([r.turn_id for r in records])
    trained = await store.mismatch.of_samples([j.sample_id if j else None for j in judged])
    audited = [
        AuditedTurn(**r.model_dump(), judgement=j, mismatch=m) for r, j, m in zip(records, judged, trained, strict=True)
    ]
    status = desc.status.name.lower() if desc.status else "unknown"
    if desc.status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
        status = "running"
    return TurnLog(
        session_id=session_id,
        workflow_id=wf_id,
        status=status,
        total=page.total,
        offset=offset,
        closed_reason=page.closed_reason,
        runs=page.runs,
        turns=audited,
    )


async def find_turn(client: Client, store: Store, user_id: str, session_id: str, turn_id: str) -> TurnRecord | None:
    """The record of turn `turn_id` among the session's last NEXT_STATE_LOOKBACK turns (any run), or None."""
    try:
        records = await _recent_turns(client, store, user_id, session_id)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return next((r for r in records if r.turn_id == turn_id), None)


NEXT_STATE_LOOKBACK = 50
"""Turns searched back from the end of the log: the turn a request pairs is the last main-line one before it."""


async def is_next_state_of_a_turn(
    client: Client, store: Store, user_id: str, session_id: str, request_key: str
) -> bool:
    """Whether a turn of the session took the request stored under `request_key` as its next state."""
    records = await _recent_turns(client, store, user_id, session_id)
    return any(r.next_state is not None and r.next_state.request_key == request_key for r in records)


async def _recent_turns(client: Client, store: Store, user_id: str, session_id: str) -> list[TurnRecord]:
    """The session's last NEXT_STATE_LOOKBACK turn records, archived ones included (it may have continued as new)."""
    handle = await session_handle(client, user_id, session_id)
    total = (await handle.query(SessionWorkflow.summary)).turns
    page: TurnsPageResult = await handle.query(
        SessionWorkflow.turns, TurnsPage(offset=max(0, total - NEXT_STATE_LOOKBACK), limit=NEXT_STATE_LOOKBACK)
    )
    return list(page.turns) + await store.turn_log.load([seg.key for seg in page.archived])
