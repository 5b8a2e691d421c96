"""`POST /v1/chat/completions` and `GET /v1/models`: the OpenAI-compatible front door.

Each request becomes one turn of a durable SessionWorkflow (api.session_gateway).
A streaming client gets tokens as the generate activity publishes them to the
turn's Redis stream (api.token_relay); the turn itself completes in Temporal
whether or not the client stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from api.auth import Caller, authenticate
from api.errors import ApiError
from api.openai_schema import (
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChunkChoice,
    Delta,
    ModelCard,
    ModelList,
    Usage,
)
from api.openapi_spec import AUTH_ERRORS, CHAT_ERRORS, CHAT_OPENAPI
from api.request_body import read_json
from api.session_identity import header_value
from api.turn_core import (
    Turn,
    assistant_message,
    chat_sampling,
    open_stream,
    split_deltas,
    start_turn,
    stream_error,
    usage,
    validate_chat,
)
from contracts.session import TurnResult
from store.errors import StoreError

__all__ = ["assistant_message", "chat_sampling", "router", "usage", "validate_chat"]

log = structlog.get_logger(__name__)

router = APIRouter()


@router.get("/v1/models", responses=AUTH_ERRORS)
async def list_models(request: Request, caller: Caller = Depends(authenticate)) -> ModelList:
    app = request.app
    update = app.state.policy_version.latest
    card = ModelCard(id=app.state.settings.api.model_name, created=int(app.state.started_at))
    if update is not None:
        card.policy_version, card.policy_updated_at = update.version, int(update.at)
    return ModelList(data=[card])


@router.post("/v1/chat/completions", responses=CHAT_ERRORS, openapi_extra=CHAT_OPENAPI)
async def chat_completions(request: Request, caller: Caller = Depends(authenticate)) -> Any:
    app = request.app
    body = await read_json(request, app.state.settings.api.max_request_bytes)
    chat = validate_chat(body)
    t, update = await start_turn(app, caller, request.headers, chat, identity_body=body)
    return await _respond(app, t, update)


async def _respond(app: FastAPI, t: Turn, update: asyncio.Future) -> Any:
    headers = {"X-Session-Id": header_value(t.session_id)}
    if not t.chat.stream:
        result = await asyncio.shield(update)
        return JSONResponse(_completion(t, result).model_dump(exclude_none=True), headers=headers)
    include_usage = bool(t.chat.stream_options and t.chat.stream_options.include_usage)
    first, tokens = await open_stream(app, t, update)
    sse = _sse(t, first, tokens, update, include_usage)
    return StreamingResponse(sse, media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"})


def _completion(t: Turn, result: TurnResult) -> ChatCompletion:
    return ChatCompletion(
        id=f"chatcmpl-{t.turn_id}",
        created=t.created,
        model=t.model,
        choices=[Choice(message=assistant_message(result.output), finish_reason=result.output.finish_reason)],
        usage=usage(result.output),
        system_fingerprint=result.output.weight_version,
    )


async def _sse(
    t: Turn, first: str | None, tokens: AsyncIterator[str], update: asyncio.Future, include_usage: bool
) -> AsyncIterator[str]:
    def chunk(delta: Delta, finish: str | None = None, usage: Usage | None = None, choices: bool = True) -> str:
        c = ChatCompletionChunk(
            id=f"chatcmpl-{t.turn_id}",
            created=t.created,
            model=t.model,
            choices=[ChunkChoice(delta=delta, finish_reason=finish)] if choices else [],
            usage=usage,
        )
        return f"data: {c.model_dump_json(exclude_none=True)}\n\n"

    try:
        yield chunk(Delta(role="assistant", content=""))
        async for r, c in split_deltas(first, tokens, update):
            yield chunk(Delta(reasoning_content=r or None, content=c or None))
        result: TurnResult = await asyncio.shield(update)
        out = result.output
        if out.tool_calls:
            yield chunk(Delta(tool_calls=[call.to_openai(index=i) for i, call in enumerate(out.tool_calls)]))
        yield chunk(Delta(), finish=out.finish_reason)
        if include_usage:
            yield chunk(Delta(), usage=usage(result.output), choices=False)
    except Exception as exc:  # the response has started: never cut it, end it with an error event (OpenAI's shape)
        failure: Exception | None = exc
        yield f"data: {json.dumps(stream_error(exc).body())}\n\n"
    else:
        failure = None
    yield "data: [DONE]\n\n"
    if failure is not None:
        # Said after the stream has ended: a log line that cannot be written (its disk full) must not cut it.
        with contextlib.suppress(Exception):
            log.warning(
                "a streamed turn ended with an error event",
                turn_id=t.turn_id,
                error=f"{type(failure).__name__}: {failure}",
                exc_info=None if isinstance(failure, (ApiError, StoreError)) else failure,
            )
