"""Audit routes: a caller sees only their own sessions and turns.

A session id is any text a chat request named (api.session_identity), '/' included, so
the routes take the rest of the path as the id: `a/b` is addressed as `/v1/sessions/a%2Fb/turns`
(or `/v1/sessions/a/b/turns`), `..` as `/v1/sessions/%2E%2E/turns`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request
from temporalio.service import RPCError, RPCStatusCode

from api.auth import Caller, authenticate
from api.errors import ApiError
from api.openapi_spec import AUTH_ERRORS, SESSION_ERRORS
from contracts.session import EndSession
from control.audit import SessionInfo, SessionNotFound, TurnLog, list_sessions, session_turns
from control.sessions import session_handle
from workflows.session import SessionWorkflow

router = APIRouter()


@router.get("/v1/sessions", responses=AUTH_ERRORS)
async def my_sessions(
    request: Request, limit: int = Query(50, ge=1, le=500), caller: Caller = Depends(authenticate)
) -> dict:
    client = await request.app.state.gateway.client()
    sessions: list[SessionInfo] = await list_sessions(client, caller.user_id, limit)
    return {"object": "list", "data": [s.model_dump(mode="json") for s in sessions]}


@router.get("/v1/sessions/{session_id:path}/turns", responses=SESSION_ERRORS)
async def turns_of(
    request: Request,
    session_id: str,
    offset: int = Query(0, ge=0),
    limit: int = Query(50, ge=1, le=500),
    caller: Caller = Depends(authenticate),
) -> TurnLog:
    client = await request.app.state.gateway.client()
    try:
        return await session_turns(client, request.app.state.store, caller.user_id, session_id, offset, limit)
    except SessionNotFound:
        raise ApiError(404, f"no session {session_id!r} for this API key's user", code="session_not_found") from None


@router.delete("/v1/sessions/{session_id:path}", responses=SESSION_ERRORS)
async def end_session(request: Request, session_id: str, caller: Caller = Depends(authenticate)) -> dict:
    """End a session now; its last main-line turn is closed without a next state."""
    client = await request.app.state.gateway.client()
    handle = await session_handle(client, caller.user_id, session_id)
    try:
        await handle.signal(SessionWorkflow.end, EndSession(reason="requested"))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ApiError(
                404, f"no running session {session_id!r} for this API key's user", code="session_not_found"
            ) from None
        raise
    return {"session_id": session_id, "ended": True}
