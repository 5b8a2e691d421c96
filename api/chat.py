"""`POST /v1/chat/completions` and `GET /v1/models`: the OpenAI-compatible front door.

Each request becomes one turn of a durable SessionWorkflow (api.session_gateway).
A streaming client gets tokens as the generate activity publishes them to the
turn's Redis stream (api.token_relay); the turn itself completes in Temporal
whether or not the client stays.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timezone
from typing import Any, AsyncIterator

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from api import prefix_links
from api.auth import Caller, authenticate
from api.errors import ApiError, error_body
from api.openai_schema import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    Delta,
    ModelCard,
    ModelList,
    Usage,
)
from api.session_identity import resolve_identity, strip_routing_fields
from api.token_relay import relay_tokens
from contracts.chat import ChatSampling, StoredChatRequest, TurnType
from contracts.learning import NextState
from contracts.session import TurnRequest, TurnResult
from contracts.summary import clip
from openclaw_rl import redis_keys
from policy_client.chat import message_text
from policy_client.chat_output import ParsedCompletion, StreamingSplitter

log = structlog.get_logger(__name__)

router = APIRouter()

REQUEST_TTL_S = 30 * 24 * 3600
"""Chat requests are kept for the judges and the audit; a month covers any training lag."""


@router.get("/v1/models")
async def list_models(request: Request, caller: Caller = Depends(authenticate)) -> ModelList:
    app = request.app
    update = app.state.policy_version.latest
    card = ModelCard(id=app.state.settings.api.model_name, created=int(app.state.started_at))
    if update is not None:
        card.policy_version, card.policy_updated_at = update.version, int(update.at)
    return ModelList(data=[card])


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, caller: Caller = Depends(authenticate)) -> Any:
    app = request.app
    settings = app.state.settings
    body = await _read_json(request, settings.api.max_request_bytes)
    try:
        chat = ChatCompletionRequest.model_validate(strip_routing_fields(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(422, f"{where or 'body'}: {first['msg']}", param=where or None) from None

    messages = [m.for_template() for m in chat.messages]
    identity = resolve_identity(request.headers, body, settings.session.side_call_markers)
    marker = settings.session.internal_context_marker
    session_id = identity.session_id
    if session_id is None:
        if identity.turn_type is TurnType.SIDE:
            session_id = f"side-{datetime.now(timezone.utc):%Y%m%d}"  # hint-less side calls of a day share one session
        else:
            session_id = (
                await prefix_links.find_session(app.state.redis, caller.user_id, messages, marker)
                or f"chat-{uuid.uuid4().hex[:16]}"
            )

    turn_id = uuid.uuid4().hex
    stored = StoredChatRequest(messages=messages, tools=chat.template_tools())
    turn = TurnRequest(
        turn_id=turn_id,
        turn_type=identity.turn_type,
        side_kind=identity.side_kind,
        sampling=ChatSampling(
            temperature=1.0 if chat.temperature is None else chat.temperature,
            top_p=1.0 if chat.top_p is None else chat.top_p,
            max_tokens=chat.max_completion_tokens or chat.max_tokens,
            stop=chat.stop_list(),
        ),
        stream=chat.stream,
        prompt_summary=_prompt_summary(messages, marker),
        message_count=len(messages),
        next_state=_next_state(messages, marker, turn_id) if identity.turn_type is TurnType.MAIN else None,
        session_done=identity.session_done,
        received_at=datetime.now(timezone.utc),
    )
    model = chat.model or settings.api.model_name
    log.info(
        "chat turn",
        user=caller.user_id,
        session=session_id,
        source=identity.source,
        turn_type=identity.turn_type.value,
        turn_id=turn_id,
        stream=chat.stream,
    )

    app.state.admission.acquire(caller.user_id)

    async def run() -> TurnResult:
        """The turn, then its prefix link; runs to the end even if a streaming client leaves."""
        try:
            await app.state.redis.set(redis_keys.chat_request(turn_id), stored.model_dump_json(), ex=REQUEST_TTL_S)
            result = await app.state.gateway.run_turn(caller.user_id, session_id, turn)
            if identity.turn_type is TurnType.MAIN:
                reply = _assistant_message(result).model_dump(exclude_none=True)
                await prefix_links.remember(
                    app.state.redis,
                    caller.user_id,
                    messages,
                    reply,
                    session_id,
                    marker,
                    settings.session.prefix_link_ttl_s,
                )
            return result
        finally:
            app.state.admission.release(caller.user_id)

    update = asyncio.ensure_future(run())
    if not chat.stream:
        result = await asyncio.shield(update)
        return JSONResponse(
            _completion(turn_id, model, result).model_dump(exclude_none=True), headers={"X-Session-Id": session_id}
        )

    include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
    tokens = relay_tokens(app.state.redis, turn_id, update)
    first = await anext(tokens, None)  # an error before the first token is still an HTTP error
    sse = _sse(turn_id, model, first, tokens, update, include_usage)
    return StreamingResponse(
        sse, media_type="text/event-stream", headers={"X-Session-Id": session_id, "Cache-Control": "no-cache"}
    )


async def _read_json(request: Request, limit: int) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body is {int(declared)} bytes; the limit is {limit} (api.max_request_bytes)")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise ApiError(413, f"request body exceeds {limit} bytes (api.max_request_bytes)")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(422, "the body must be a JSON object")
    return body


def _real_messages(messages: list[dict[str, Any]], marker: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, m) for i, m in enumerate(messages) if not prefix_links.is_internal_context(m, marker)]


def _prompt_summary(messages: list[dict[str, Any]], marker: str) -> str:
    real = _real_messages(messages, marker)
    if not real:
        return ""
    _, last = real[-1]
    return clip(f"{last['role']}: {message_text(last.get('content'))}")


def _next_state(messages: list[dict[str, Any]], marker: str, turn_id: str) -> NextState | None:
    """The last real message (a user reply or a tool result); client-injected context is skipped."""
    real = _real_messages(messages, marker)
    if not real or real[-1][1]["role"] not in ("user", "tool"):
        return None
    index, msg = real[-1]
    return NextState(
        role=msg["role"],
        summary=clip(message_text(msg.get("content"))),
        request_key=redis_keys.chat_request(turn_id),
        message_index=index,
    )


def _assistant_message(result: TurnResult) -> AssistantMessage:
    out = result.output
    calls = [c.to_openai() for c in out.tool_calls] or None
    return AssistantMessage(
        content=out.content if (out.content or not calls) else None, reasoning_content=out.reasoning, tool_calls=calls
    )


def _usage(result: TurnResult) -> Usage:
    o = result.output
    return Usage(
        prompt_tokens=o.prompt_tokens,
        completion_tokens=o.completion_tokens,
        total_tokens=o.prompt_tokens + o.completion_tokens,
    )


def _completion(turn_id: str, model: str, result: TurnResult) -> ChatCompletion:
    return ChatCompletion(
        id=f"chatcmpl-{turn_id}",
        created=int(time.time()),
        model=model,
        choices=[Choice(message=_assistant_message(result), finish_reason=result.output.finish_reason)],
        usage=_usage(result),
        system_fingerprint=result.output.weight_version,
    )


async def _sse(
    turn_id: str, model: str, first: str | None, tokens: AsyncIterator[str], update: asyncio.Future, include_usage: bool
) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: Delta, finish: str | None = None, usage: Usage | None = None, choices: bool = True) -> str:
        c = ChatCompletionChunk(
            id=f"chatcmpl-{turn_id}",
            created=created,
            model=model,
            choices=[ChunkChoice(delta=delta, finish_reason=finish)] if choices else [],
            usage=usage,
        )
        return f"data: {c.model_dump_json(exclude_none=True)}\n\n"

    splitter = StreamingSplitter()
    text = ""
    try:
        yield chunk(Delta(role="assistant", content=""))
        delta = first
        while delta is not None:
            text += delta
            r, c = splitter.feed(text)
            if r or c:
                yield chunk(Delta(reasoning_content=r or None, content=c or None))
            delta = await anext(tokens, None)
        result: TurnResult = await asyncio.shield(update)
        out = result.output
        r, c = splitter.finish(
            ParsedCompletion(content=out.content, reasoning=out.reasoning, tool_calls=out.tool_calls)
        )
        if r or c:
            yield chunk(Delta(reasoning_content=r or None, content=c or None))
        if out.tool_calls:
            yield chunk(Delta(tool_calls=[call.to_openai(index=i) for i, call in enumerate(out.tool_calls)]))
        yield chunk(Delta(), finish=out.finish_reason)
        if include_usage:
            yield chunk(Delta(), usage=_usage(result), choices=False)
    except ApiError as exc:
        yield f"data: {json.dumps(error_body(exc.status, exc.message, code=exc.code))}\n\n"
    yield "data: [DONE]\n\n"
