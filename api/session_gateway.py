"""How the API reaches SessionWorkflows: one Update-with-start per chat request.

The update id is the turn id, so a request retried after Temporal was briefly
unreachable attaches to the same update instead of running the turn twice.

Temporal admits a bounded number of updates in flight per workflow (10 by
default, `history.maxInFlightUpdates`) and refuses more with RESOURCE_EXHAUSTED,
cause CONCURRENT_LIMIT. Main-line turns of one session queue behind each other
in the workflow, so that limit is "too many requests on this session": a 429,
not an outage (api.admission refuses such a turn first, without asking Temporal).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import structlog
from temporalio.api.enums.v1 import ResourceExhaustedCause
from temporalio.api.errordetails.v1 import (
    MultiOperationExecutionFailure,
    ResourceExhaustedFailure,
    WorkflowNotReadyFailure,
)
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api.admission import session_busy
from api.errors import ERROR_STATUS, ApiError
from contracts.errors import ErrorType
from contracts.session import TurnRequest, TurnResult
from control.sessions import running_legacy_session, session_start, session_workflow_id
from openclaw_rl.settings import Settings
from openclaw_rl.temporal_client import connect
from workflows.session import SessionWorkflow

log = structlog.get_logger(__name__)

_TRANSIENT_RPC = {
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.CANCELLED,
    RPCStatusCode.UNKNOWN,
    RPCStatusCode.RESOURCE_EXHAUSTED,
}
_RETRY_SLEEP_S = 0.2
_ROLL_WAIT_S = 20.0
"""How long a request waits for a session that is ending or continuing as new."""
_NEW_FORM_REMEMBERED = 50_000
"""Sessions this process knows have no old-form workflow running (their turns skip the look-up): once none runs,
none starts again, so the answer never goes stale; bounded, the oldest forgotten first."""

_ADVICE = {
    ErrorType.STORE_UNAVAILABLE: (
        "the server's store (Redis) could not be reached, so the turn was not completed; retry shortly"
    ),
    ErrorType.STORAGE_FULL: (
        "the server's storage is full, so the turn was not completed; retry later (if the disk is full, an operator "
        "must free space on the data disk)"
    ),
}
"""What the client is told besides the reason, for failures that are the server's and pass."""


def turn_error(kind: str | None, message: str) -> ApiError:
    """The HTTP error of a turn that failed with ApplicationError type `kind`; unknown types are a 500."""
    status, code = ERROR_STATUS.get(kind or "", (500, "turn_failed"))
    advice = _ADVICE.get(kind or "")
    return ApiError(status, f"{advice}. Reason: {message}" if advice else message, code=code)


class SessionGateway:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._client: Client | None = None
        self._lock = asyncio.Lock()
        self._new_form: OrderedDict[str, None] = OrderedDict()

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                self._client = await connect(self.settings.temporal, keyring=self.settings.keyring())
            return self._client

    async def run_turn(
        self, user_id: str, session_id: str, req: TurnRequest, forgotten: Callable[[], Awaitable[bool]] | None = None
    ) -> TurnResult:
        """`forgotten`: asked before each retry; True (the user was forgotten meanwhile, control.user_data) ends the
        turn with a 410 instead of starting their session again."""
        wf_id = session_workflow_id(user_id, session_id)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and forgotten is not None and await forgotten():
                raise ApiError(410, "this user was forgotten; the turn was not run", code="user_forgotten")
            op = session_start(self.settings, user_id, session_id)
            try:
                client = await self.client()
                if legacy := await self._running_legacy(client, wf_id, user_id, session_id):
                    try:  # a plain update: a start here would open a new workflow under the old id
                        return await client.get_workflow_handle(legacy).execute_update(
                            SessionWorkflow.turn, req, id=req.turn_id
                        )
                    except RPCError as exc:
                        if exc.status != RPCStatusCode.NOT_FOUND:
                            raise
                        continue  # it closed meanwhile: the next try starts (or reaches) the new-form one
                return await client.execute_update_with_start_workflow(
                    SessionWorkflow.turn, req, start_workflow_operation=op, id=req.turn_id
                )
            except WorkflowUpdateFailedError as exc:
                cause = exc.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                if (
                    kind in (ErrorType.SESSION_CLOSED, ErrorType.SESSION_ROLLING)
                    and time.monotonic() - started < _ROLL_WAIT_S
                ):
                    await asyncio.sleep(
                        _RETRY_SLEEP_S
                    )  # the old run is finishing; the next try reaches or starts the new one
                    continue
                raise turn_error(kind, getattr(cause, "message", None) or str(exc)) from exc
            except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError, OSError, RuntimeError) as exc:
                await _take_start_error(op)
                if isinstance(exc, RPCError) and is_update_limit(exc):
                    raise session_busy() from exc
                dropped = isinstance(exc, RPCError) and is_workflow_not_ready(exc)
                if dropped and time.monotonic() - started < _ROLL_WAIT_S:
                    log.info("turn dropped with a failed workflow task; sending it again", workflow_id=wf_id)
                    await asyncio.sleep(_RETRY_SLEEP_S)
                    continue
                if isinstance(exc, RPCError) and exc.status not in _TRANSIENT_RPC:
                    raise ApiError(503, f"Temporal refused the turn: {exc.message}", code="temporal_error") from exc
                if time.monotonic() - started >= self.settings.api.temporal_retry_s:
                    raise ApiError(
                        503,
                        "Temporal is unreachable; the turn was not run. Retry shortly.",
                        code="temporal_unavailable",
                    ) from exc
                log.warning("temporal call failed; retrying", workflow_id=wf_id, turn_id=req.turn_id, error=str(exc))
                await asyncio.sleep(_RETRY_SLEEP_S)

    async def _running_legacy(self, client: Client, wf_id: str, user_id: str, session_id: str) -> str | None:
        """The session's old-form workflow id (`session/<user id>/...`) while it runs (control.sessions); None once
        this process has seen it is not, from then on without asking."""
        if wf_id in self._new_form:
            return None
        legacy = await running_legacy_session(client, user_id, session_id)
        if legacy is None:
            self._new_form[wf_id] = None
            while len(self._new_form) > _NEW_FORM_REMEMBERED:
                self._new_form.popitem(last=False)
        return legacy


async def _take_start_error(op: WithStartWorkflowOperation) -> None:
    """A failed Update-with-start parks its error on the start operation too. Take it from there, or asyncio logs
    "Future exception was never retrieved" with a traceback for every refused request."""
    waiter = asyncio.ensure_future(op.workflow_handle())
    await asyncio.sleep(0)  # a settled operation resolves in this one step
    if not waiter.done():
        waiter.cancel()  # the call failed before the start was sent: nothing is parked
    elif not waiter.cancelled():
        waiter.exception()


def is_update_limit(exc: RPCError) -> bool:
    """The workflow has as many updates in flight as Temporal admits (not a server-wide overload)."""
    if exc.status != RPCStatusCode.RESOURCE_EXHAUSTED:
        return False
    return ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT in _exhausted_causes(exc)


def is_workflow_not_ready(exc: RPCError) -> bool:
    """The workflow task that carried the update failed on the server, so the update was dropped, never run.

    It happens when a session continues as new in the same instant a judge child reports back: the server fails
    that closing task (UnhandledCommand) and aborts the updates it carried. The next try reaches the new run.
    """
    return any(d.Unpack(WorkflowNotReadyFailure()) for d in _details(exc))


def _exhausted_causes(exc: RPCError) -> set[int]:
    """ResourceExhaustedFailure causes in the status details."""
    causes: set[int] = set()
    for detail in _details(exc):
        exhausted = ResourceExhaustedFailure()
        if detail.Unpack(exhausted):
            causes.add(exhausted.cause)
    return causes


def _details(exc: RPCError) -> list:
    """The error details of the status: plain, or per operation of an Update-with-start."""
    out = []
    for detail in exc.grpc_status.details:
        multi = MultiOperationExecutionFailure()
        if detail.Unpack(multi):
            out.extend(d for op in multi.statuses for d in op.details)
        else:
            out.append(detail)
    return out
