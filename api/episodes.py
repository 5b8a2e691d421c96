"""Episodes an outside agent drives: open them, send the model calls under them, run the task's tools, end them.

    POST /v1/episodes                              {"setting": "swe", "task_id": "...", "samples": 2}
                                                   or {"samples": 1} (free-form: the client posts the outcome)
    GET  /v1/episodes/{id}                         state; the task's opening messages and tools once open
    POST /v1/episodes/{id}/chat/completions        OpenAI chat completions: point a client's base_url at
                                                   /v1/episodes/{id} and its loop runs unmodified
    POST /v1/episodes/{id}/tools/{name}            {"arguments": {...}}: a tool of the task's environment
    POST /v1/episodes/{id}/exec                    {"command": "..."}: a shell command in the task's workspace
    POST /v1/episodes/{id}/outcome                 {} (a task: its checker decides) or {"outcome": 0.7}

Each call is an update of the episode's EpisodeWorkflow (contracts.client_episodes); only the key's user that
opened an episode can see or drive it (others get 404). Episodes opened together are one task group: their steps
are standardised together when the last one ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from typing import Any

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from api import idempotency
from api.auth import Caller, authenticate
from api.chat import assistant_message, chat_sampling, usage, validate_chat
from api.errors import ERROR_STATUS, ApiError
from api.openai_schema import ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice, Delta
from api.openapi_spec import CHAT_OPENAPI, EPISODE_ERRORS, json_body
from api.request_body import read_json
from contracts.chat import GenerateOutput, StoredChatRequest, tenant_of
from contracts.client_episodes import (
    CLIENT_EXEC_UPDATE,
    CLIENT_FINISH_UPDATE,
    CLIENT_STEP_UPDATE,
    CLIENT_TOOL_UPDATE,
    ClientCall,
    ClientEpisodeView,
    ClientExecInput,
    ClientExecResult,
    ClientFinished,
    ClientFinishInput,
    ClientStepInput,
    ClientStepOutput,
    ClientToolInput,
    ClientToolResult,
    client_episode_id,
)
from contracts.episodes import SettingName, episode_workflow_id
from control.episodes import start_client_group
from envs.registry import UnknownSetting
from openclaw_rl import tracing
from openclaw_rl.settings import GENERAL_AGENT_STREAMS
from store import keys
from store.errors import StoreError

log = structlog.get_logger(__name__)

router = APIRouter()

_OPEN_WAIT_S = 120.0
"""How long GET waits for a task episode's environment to open before answering without its opening."""
CHAT_BODY = {"requestBody": CHAT_OPENAPI["requestBody"]}
"""The chat route's body (its headers are the session's, not an episode's)."""
_START_WAIT_S = 30.0
"""How long opening episodes waits for the group to start them."""
_NO_STEP = frozenset({404, 409, 410})
"""Statuses of a model call no step ran with (the episode is gone, not the caller's, or over); a 503 may still have
run (its retry, with the same Idempotency-Key, gets that step), so its request is kept."""
_PAYLOAD_HEADROOM_BYTES = 16 * 1024
"""Room under temporal.max_payload_bytes for what the episode adds when it hands a call on to its environment's
activity (ids, the call's number): the call's own payload must leave it, or that activity could not be scheduled."""
_RPC_STATUS = {
    RPCStatusCode.RESOURCE_EXHAUSTED: (429, "too many calls in flight on this episode; retry shortly"),
    RPCStatusCode.UNAVAILABLE: (503, "Temporal could not be reached; retry shortly"),
    RPCStatusCode.DEADLINE_EXCEEDED: (503, "Temporal did not answer in time; retry shortly"),
}


class EpisodeOpenRequest(BaseModel):
    setting: SettingName | None = None
    """A task of this setting (its checker gives the outcome); none: free-form episodes."""
    task_id: str | None = Field(None, min_length=1, max_length=200)
    samples: int = Field(1, ge=1, le=64)
    """Episodes of the same task, standardised together (the paper: 8)."""
    label: SettingName | None = None
    """Free-form episodes: their sample stream (default `client`)."""


class OpenedEpisode(BaseModel):
    id: str
    base_url: str
    """Give this to an OpenAI client as its base URL: its chat completions are this episode's steps."""
    workflow_id: str


class EpisodeGroupOpened(BaseModel):
    group_id: str
    episodes: list[OpenedEpisode]


class ToolCallRequest(BaseModel):
    arguments: dict[str, Any] = Field(default_factory=dict)


class OutcomeRequest(BaseModel):
    outcome: float | None = Field(None, allow_inf_nan=False)


def _workflow_id(episode_id: str) -> str:
    group, sep, index = episode_id.rpartition(".")
    if not sep or not group.startswith("client-") or not index.isdigit():
        raise ApiError(404, f"no episode {episode_id!r} for this API key's user", code="episode_not_found")
    return episode_workflow_id(group, int(index))


def _parse(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(422, f"{where or 'body'}: {first['msg']}", param=where or None) from None


@router.post("/v1/episodes", responses=EPISODE_ERRORS, openapi_extra=json_body(EpisodeOpenRequest))
async def open_episodes(request: Request, caller: Caller = Depends(authenticate)) -> EpisodeGroupOpened:
    app = request.app
    settings = app.state.settings
    if not settings.envs.client.enabled:
        raise ApiError(403, "client-driven episodes are turned off here (envs.client.enabled)", code="disabled")
    req: EpisodeOpenRequest = _parse(EpisodeOpenRequest, await read_json(request, settings.api.max_request_bytes))
    if (req.setting is None) != (req.task_id is None):
        raise ApiError(400, "name both setting and task_id (a task), or neither (free-form)", code="invalid_request")
    if req.setting is not None and req.label is not None:
        raise ApiError(400, "label is for free-form episodes (a task's samples go to its setting's stream)")
    taken = {"personal", *GENERAL_AGENT_STREAMS, *settings.envs.builtin(), *settings.envs.plugins}
    if req.label is not None and req.label in taken:
        raise ApiError(
            400, f"label {req.label!r} is a setting's sample stream: free-form samples need a name of their own"
        )
    if req.samples > settings.envs.client.max_group:
        raise ApiError(400, f"at most {settings.envs.client.max_group} episodes at once (envs.client.max_group)")
    client = await app.state.gateway.client()
    try:
        group_id, ids = await start_client_group(
            client,
            settings,
            caller.user_id,
            setting=req.setting,
            task_id=req.task_id,
            samples=req.samples,
            label=req.label,
        )
    except (UnknownSetting, ValueError) as exc:
        raise ApiError(400, str(exc), code="unknown_setting") from None
    await app.state.store.users.note_group(caller.user_id, group_id)  # what export and forget find it by
    if await app.state.store.users.is_forgotten(caller.user_id):
        # Forgotten while this request ran (its key was valid when it came in): a forget that collected the user's
        # groups before this one was noted would leave it behind, so the request removes what it made.
        await _remove_group(client, app.state.store, caller.user_id, group_id, ids)
        raise ApiError(410, "this user was forgotten; no episode was opened", code="user_forgotten")
    await _wait_started(client, ids)
    base = str(request.base_url).rstrip("/")
    episodes = [
        OpenedEpisode(
            id=client_episode_id(group_id, k),
            base_url=f"{base}/v1/episodes/{client_episode_id(group_id, k)}",
            workflow_id=w,
        )
        for k, w in enumerate(ids)
    ]
    log.info(
        "client episodes opened",
        user=tenant_of(caller.user_id),
        group=group_id,
        setting=req.setting,
        samples=req.samples,
    )
    return EpisodeGroupOpened(group_id=group_id, episodes=episodes)


async def _remove_group(client, store, user_id: str, group_id: str, episode_ids: list[str]) -> None:
    """A group opened for a user forgotten meanwhile: its workflows deleted (Temporal terminates them first), its
    store keys and its index entry gone."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest

    for wf_id in (f"group/{group_id}", *episode_ids):
        with contextlib.suppress(RPCError):  # not started yet, or gone already: nothing of it to keep
            await client.workflow_service.delete_workflow_execution(
                DeleteWorkflowExecutionRequest(
                    namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wf_id)
                )
            )
    await store.users.forget_groups(user_id, [group_id])


async def _wait_started(client, workflow_ids: list[str]) -> None:
    """The group starts its episodes as child workflows: answer once each exists, so the client's first call (a
    chat completion, or GET) finds it."""
    deadline = time.monotonic() + _START_WAIT_S
    for wf_id in workflow_ids:
        while True:
            try:
                await client.get_workflow_handle(wf_id).describe()
                break
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                if time.monotonic() > deadline:
                    raise ApiError(
                        503, "the episodes did not start in time; retry", code="episodes_not_started"
                    ) from None
                await asyncio.sleep(0.05)


@router.get("/v1/episodes/{episode_id}", responses=EPISODE_ERRORS)
async def episode_state(request: Request, episode_id: str, caller: Caller = Depends(authenticate)) -> dict:
    """The episode's state; for a task, its opening messages and tools (what the agent starts from)."""
    view = await _view(request, episode_id, caller)
    deadline = time.monotonic() + _OPEN_WAIT_S
    while not view.ready and view.failed is None and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        view = await _view(request, episode_id, caller)
    out: dict[str, Any] = view.model_dump(exclude={"owner"})
    if view.ready and not view.free_form:
        try:
            key = keys.episode_attempt(_workflow_id(episode_id), 1)
            opening = await request.app.state.store.episodes.opening(key)
            out["messages"], out["tools"] = opening.messages, opening.tools
        except (LookupError, StoreError) as exc:
            raise ApiError(503, f"the episode's opening could not be read: {exc}", code="store_unavailable") from None
    return out


async def _view(request: Request, episode_id: str, caller: Caller) -> ClientEpisodeView:
    client = await request.app.state.gateway.client()
    handle = client.get_workflow_handle(_workflow_id(episode_id))
    try:
        view = await handle.query("client_view", result_type=ClientEpisodeView)
    except WorkflowQueryFailedError:  # not an episode this route serves
        raise ApiError(404, f"no episode {episode_id!r} for this API key's user", code="episode_not_found") from None
    except RPCError as exc:
        if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise ApiError(
                404, f"no episode {episode_id!r} for this API key's user", code="episode_not_found"
            ) from None
        raise
    if view.owner != caller.user_id:
        raise ApiError(404, f"no episode {episode_id!r} for this API key's user", code="episode_not_found")
    return view


async def _update(
    request: Request, episode_id: str, name: str, arg: ClientCall, result_type: type, update_id: str | None = None
) -> Any:
    """The call as an update of the episode's workflow. `update_id`: a retry with the same id gets the first
    call's result (Temporal deduplicates updates by id within a run) instead of running again."""
    client = await request.app.state.gateway.client()
    handle = client.get_workflow_handle(_workflow_id(episode_id))
    if traceparent := tracing.traceparent():  # what the call runs joins this request's trace
        arg = arg.model_copy(update={"traceparent": traceparent})
    await _fits_a_payload(client, arg, request.app.state.settings.temporal.max_payload_bytes)
    failure: str | None = None
    try:
        return await handle.execute_update(name, arg, result_type=result_type, id=update_id or uuid.uuid4().hex)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        kind = cause.type if isinstance(cause, ApplicationError) else None
        if kind in ERROR_STATUS:
            status, code = ERROR_STATUS[kind]
            message = getattr(cause, "message", None) or str(cause or exc)
            if status == 404:
                message = f"no episode {episode_id!r} for this API key's user"
            raise ApiError(status, message, code=code) from None
        failure = getattr(cause, "message", None) or str(cause or exc)  # the workflow may have closed meanwhile
    except RPCError as exc:
        if exc.status in _RPC_STATUS:
            status, message = _RPC_STATUS[exc.status]
            raise ApiError(status, message) from None
        if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise
    # The workflow has closed (ended or abandoned), or never existed: its state says which, to its owner only.
    view = await _view(request, episode_id, Caller(user_id=arg.caller, key_id=""))
    if isinstance(arg, ClientFinishInput) and view.finished is not None:  # the end, asked again
        if arg.outcome is None or arg.outcome == view.finished.outcome:
            return view.finished
        raise ApiError(
            409, f"the episode already ended with outcome {view.finished.outcome:g}", code="episode_conflict"
        )
    if failure is not None and view.failed is None and view.finished is None:
        raise ApiError(500, f"the call failed: {failure}", code="episode_call_failed")
    why = view.failed or (f"it ended with outcome {view.finished.outcome:g}" if view.finished else "it has closed")
    raise ApiError(409, f"the episode is over: {why}", code="episode_conflict")


async def _fits_a_payload(client, arg: ClientCall, max_payload_bytes: int) -> None:
    """Refuse up front (413, with the sizes) a call Temporal would refuse: measured as it would travel, through the
    client's own data converter (so encrypted when encryption is on)."""
    size = sum(p.ByteSize() for p in await client.data_converter.encode([arg]))
    limit = max_payload_bytes - _PAYLOAD_HEADROOM_BYTES
    if size > limit:
        raise ApiError(
            413,
            f"this call is {size} bytes as it would travel to the episode; an episode's call may be at most {limit} "
            f"(Temporal's payload limit, temporal.max_payload_bytes={max_payload_bytes}, less room for the episode's "
            "own fields). Send less per call: a large file in pieces, or written by a command that makes it",
            code="call_too_large",
        )


@router.post("/v1/episodes/{episode_id}/chat/completions", responses=EPISODE_ERRORS, openapi_extra=CHAT_BODY)
async def episode_chat(request: Request, episode_id: str, caller: Caller = Depends(authenticate)) -> Any:
    app = request.app
    body = await read_json(request, app.state.settings.api.max_request_bytes)
    chat = validate_chat(body)
    key = idempotency.key_from(request.headers)  # checked before anything runs
    _workflow_id(episode_id)  # a well-formed id before it names a key
    store = app.state.store
    if await store.users.is_forgotten(caller.user_id):  # a call that outlived its key: keep nothing of it
        raise ApiError(410, "this user was forgotten; the call was not run", code="user_forgotten")
    turn_id = uuid.uuid4().hex
    # Named by the episode (so by its group): a forget finds its requests with the rest of the group's keys.
    request_id = f"{episode_id}.{turn_id}"
    stored = StoredChatRequest(messages=[m.for_template() for m in chat.messages], tools=chat.template_tools())
    try:
        request_key = await store.requests.save(request_id, stored)
    except StoreError as exc:
        raise ApiError(503, f"the request could not be kept: {exc}", code="store_unavailable") from None
    try:
        out: ClientStepOutput = await _update(
            request,
            episode_id,
            CLIENT_STEP_UPDATE,
            ClientStepInput(caller=caller.user_id, request_key=request_key, sampling=chat_sampling(chat)),
            ClientStepOutput,
            update_id=_step_update_id(caller, episode_id, key) if key else None,
        )
    except ApiError as exc:
        if exc.status in _NO_STEP:  # no step took it: nothing reads it (nor would a forget find it later)
            with contextlib.suppress(StoreError):
                await store.requests.delete(request_id)
        raise
    cid, created, model = f"chatcmpl-{turn_id}", int(time.time()), chat.model or app.state.settings.api.model_name
    if chat.stream:
        return StreamingResponse(_one_chunk_stream(cid, created, model, out.output), media_type="text/event-stream")
    completion = ChatCompletion(
        id=cid,
        created=created,
        model=model,
        choices=[Choice(message=assistant_message(out.output), finish_reason=out.output.finish_reason)],
        usage=usage(out.output),
        system_fingerprint=out.output.weight_version,
    )
    return JSONResponse(completion.model_dump(exclude_none=True), headers={"X-Episode-Step": str(out.step)})


def _step_update_id(caller: Caller, episode_id: str, key: str) -> str:
    """A chat call retried with the same `Idempotency-Key` is the same step (without one, a retry is a new step)."""
    return "step-" + hashlib.sha256(f"{caller.user_id}\n{episode_id}\n{key}".encode()).hexdigest()[:32]


async def _one_chunk_stream(cid: str, created: int, model: str, out: GenerateOutput):
    """A streaming client gets the whole answer as one content chunk (the step has run when the update returns)."""

    def chunk(delta: Delta, finish: str | None = None) -> str:
        c = ChatCompletionChunk(
            id=cid, created=created, model=model, choices=[ChunkChoice(delta=delta, finish_reason=finish)]
        )
        return f"data: {c.model_dump_json(exclude_none=True)}\n\n"

    yield chunk(Delta(role="assistant", content=out.content or ""))
    if out.tool_calls:
        yield chunk(Delta(tool_calls=[call.to_openai(index=i) for i, call in enumerate(out.tool_calls)]))
    yield chunk(Delta(), finish=out.finish_reason)
    yield "data: [DONE]\n\n"


@router.post(
    "/v1/episodes/{episode_id}/tools/{name}", responses=EPISODE_ERRORS, openapi_extra=json_body(ToolCallRequest)
)
async def episode_tool(
    request: Request, episode_id: str, name: str, caller: Caller = Depends(authenticate)
) -> ClientToolResult:
    body = await read_json(request, request.app.state.settings.api.max_request_bytes)
    req: ToolCallRequest = _parse(ToolCallRequest, body)
    return await _update(
        request,
        episode_id,
        CLIENT_TOOL_UPDATE,
        ClientToolInput(caller=caller.user_id, name=name, arguments=req.arguments),
        ClientToolResult,
    )


class ExecRequest(BaseModel):
    command: str = Field(min_length=1, max_length=100_000)


@router.post("/v1/episodes/{episode_id}/exec", responses=EPISODE_ERRORS, openapi_extra=json_body(ExecRequest))
async def episode_exec(request: Request, episode_id: str, caller: Caller = Depends(authenticate)) -> ClientExecResult:
    """A shell command in the task's workspace (terminal, swe): what an agent that runs its own commands needs."""
    body = await read_json(request, request.app.state.settings.api.max_request_bytes)
    req: ExecRequest = _parse(ExecRequest, body)
    return await _update(
        request,
        episode_id,
        CLIENT_EXEC_UPDATE,
        ClientExecInput(caller=caller.user_id, command=req.command),
        ClientExecResult,
    )


@router.post("/v1/episodes/{episode_id}/outcome", responses=EPISODE_ERRORS, openapi_extra=json_body(OutcomeRequest))
async def episode_outcome(request: Request, episode_id: str, caller: Caller = Depends(authenticate)) -> ClientFinished:
    body = await read_json(request, request.app.state.settings.api.max_request_bytes)
    req: OutcomeRequest = _parse(OutcomeRequest, body)
    return await _update(
        request,
        episode_id,
        CLIENT_FINISH_UPDATE,
        ClientFinishInput(caller=caller.user_id, outcome=req.outcome),
        ClientFinished,
    )
