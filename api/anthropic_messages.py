"""`POST /v1/messages`: Anthropic's Messages API in front of the same turns as chat completions.

A request is translated into the internal chat form (system prompt -> a system message, `tool_use` blocks -> an
assistant message's tool calls, `tool_result` blocks -> tool messages, tools' `input_schema` -> function
parameters) and runs through api.turn_core; the TurnResult is written back as a Message, or as Anthropic's stream
of events. Errors answer in Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`.

The session: Anthropic clients name none of our headers, but Claude-Code-class agents put one in
`metadata.user_id` (`user_<hash>_account_<uuid>_session_<uuid>`, or a JSON object with `session_id`). Its
session part names the session; without one the request is linked by its history's prefix, as a hint-less chat
request is (a bare user id names a person, not a conversation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any, AsyncIterator

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from api.anthropic_schema import Message, MessagesRequest, MessagesUsage, StopReason, TextBlock
from api.auth import Caller, authenticate_bearer_or_x_api_key
from api.errors import ApiError, register_error_shape
from api.openai_schema import ChatCompletionRequest
from api.request_body import read_json
from api.session_identity import ROUTING_BODY_FIELDS, SessionHint, header_value
from api.turn_core import Turn, function_tool, open_stream, split_deltas, start_turn, stream_error, translated_chat
from contracts.chat import GenerateOutput
from contracts.session import TurnResult
from store.errors import StoreError

log = structlog.get_logger(__name__)

PATH = "/v1/messages"
router = APIRouter()

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    410: "permission_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_shape(exc: ApiError) -> tuple[int, dict]:
    """Anthropic's error body; a 422 is Anthropic's 400 (it has no 422)."""
    status = 400 if exc.status == 422 else exc.status
    return status, {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": exc.message}}


register_error_shape(PATH, error_shape)


@router.post(PATH, include_in_schema=False)
async def messages(request: Request, caller: Caller = Depends(authenticate_bearer_or_x_api_key)) -> Any:
    app = request.app
    body = await read_json(request, app.state.settings.api.max_request_bytes)
    req = validate(body)
    chat = to_chat(req)
    identity_body = {k: body[k] for k in ROUTING_BODY_FIELDS if k in body}
    identity_body["messages"] = [m.model_dump(exclude_none=True) for m in chat.messages]
    t, update = await start_turn(
        app,
        caller,
        request.headers,
        chat,
        identity_body=identity_body,
        hint=session_hint(req),
        protocol="anthropic-messages",
    )
    headers = {"X-Session-Id": header_value(t.session_id)}
    if not req.stream:
        result = await asyncio.shield(update)
        return JSONResponse(to_message(t, result.output).model_dump(), headers=headers)
    first, tokens = await open_stream(app, t, update)
    return StreamingResponse(
        _events(t, first, tokens, update),
        media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache"},
    )


def validate(body: dict[str, Any]) -> MessagesRequest:
    try:
        return MessagesRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"{where or 'body'}: {first['msg']}", param=where or None) from None


_SESSION_PART = re.compile(r"_session_([A-Za-z0-9._:-]+)$")


def session_hint(req: MessagesRequest) -> SessionHint | None:
    user = req.metadata.user_id if req.metadata else None
    if not user:
        return None
    with contextlib.suppress(ValueError):
        parsed = json.loads(user)
        if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str) and parsed["session_id"].strip():
            return SessionHint(session_id=parsed["session_id"].strip(), source="metadata.user_id")
    if match := _SESSION_PART.search(user):
        return SessionHint(session_id=match.group(1), source="metadata.user_id")
    return None


def _text(blocks: str | list[TextBlock]) -> str:
    return blocks if isinstance(blocks, str) else "\n".join(b.text for b in blocks)


def to_chat(req: MessagesRequest) -> ChatCompletionRequest:
    """The request in the internal chat form, validated as a chat request is (so its limits hold here too)."""
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": _text(req.system)})
    for m in req.messages:
        if isinstance(m.content, str):
            messages.append({"role": m.role, "content": m.content})
            continue
        text = "".join(b.text for b in m.content if b.type == "text")
        if m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            calls = [
                {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input)}}
                for b in m.content
                if b.type == "tool_use"
            ]
            thinking = "".join(b.thinking for b in m.content if b.type == "thinking")
            if calls:
                msg["tool_calls"] = calls
            if thinking:
                msg["reasoning_content"] = thinking
            messages.append(msg)
            continue
        # Tool results first: Anthropic puts them at the head of the user turn, chat templates as tool messages.
        for b in m.content:
            if b.type == "tool_use":
                raise ApiError(400, "a user message cannot hold a tool_use block", param="messages")
            if b.type == "tool_result":
                messages.append({"role": "tool", "tool_call_id": b.tool_use_id, "content": b.text()})
        if text or not any(b.type == "tool_result" for b in m.content):
            messages.append({"role": "user", "content": text})
    chat: dict[str, Any] = {
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stop": req.stop_sequences,
        "stream": req.stream,
    }
    if req.tools:
        chat["tools"] = [function_tool(t.name, t.description, t.input_schema) for t in req.tools]
    if req.tool_choice is not None:
        choice = req.tool_choice
        if choice.type == "tool" and not choice.name:
            raise ApiError(400, "tool_choice.name: a tool choice of type 'tool' names the tool", param="tool_choice")
        chat["tool_choice"] = {
            "auto": "auto",
            "any": "required",
            "none": "none",
            "tool": {"type": "function", "function": {"name": choice.name}},
        }[choice.type]
    return translated_chat(chat)


def stop_reason(out: GenerateOutput) -> StopReason:
    if out.tool_calls:
        return "tool_use"
    if out.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if out.stop_sequence else "end_turn"


def _tool_input(arguments: str) -> dict[str, Any]:
    """A tool_use block's input is an object; a policy that wrote other JSON gets it under `arguments`."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def content_blocks(out: GenerateOutput) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if out.content:
        blocks.append({"type": "text", "text": out.content})
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)} for c in out.tool_calls
    ]
    return blocks


def to_message(t: Turn, out: GenerateOutput) -> Message:
    return Message(
        id=f"msg_{t.turn_id}",
        model=t.model,
        content=content_blocks(out),
        stop_reason=stop_reason(out),
        stop_sequence=out.stop_sequence,
        usage=MessagesUsage(input_tokens=out.prompt_tokens, output_tokens=out.completion_tokens),
    )


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


async def _events(t: Turn, first: str | None, tokens: AsyncIterator[str], update: asyncio.Future) -> AsyncIterator[str]:
    """Anthropic's sequence: message_start; per block content_block_start, its deltas, content_block_stop (a ping
    after the first block starts); message_delta with the stop reason and usage; message_stop."""
    message = {
        "id": f"msg_{t.turn_id}",
        "type": "message",
        "role": "assistant",
        "model": t.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    index, pinged = 0, False
    try:
        yield _event("message_start", {"message": message})
        text_open = False
        async for _reasoning, content in split_deltas(first, tokens, update):
            if not content:
                continue  # reasoning is not sent: a thinking block needs a signature we cannot give
            if not text_open:
                yield _event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                text_open = True
                if not pinged:
                    yield _event("ping", {})
                    pinged = True
            yield _event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": content}})
        result: TurnResult = await asyncio.shield(update)
        out = result.output
        if text_open:
            yield _event("content_block_stop", {"index": index})
            index += 1
        for call in out.tool_calls:
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            yield _event("content_block_start", {"index": index, "content_block": block})
            if not pinged:
                yield _event("ping", {})
                pinged = True
            partial = json.dumps(_tool_input(call.arguments))
            yield _event(
                "content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": partial}}
            )
            yield _event("content_block_stop", {"index": index})
            index += 1
        if not pinged:
            yield _event("ping", {})
        usage = {"input_tokens": out.prompt_tokens, "output_tokens": out.completion_tokens}
        delta = {"stop_reason": stop_reason(out), "stop_sequence": out.stop_sequence}
        yield _event("message_delta", {"delta": delta, "usage": usage})
        yield _event("message_stop", {})
    except Exception as exc:  # the response has started: end it with Anthropic's error event, never cut it
        _, body = error_shape(stream_error(exc))
        yield f"event: error\ndata: {json.dumps(body)}\n\n"
        with contextlib.suppress(Exception):
            log.warning(
                "a streamed Messages turn ended with an error event",
                turn_id=t.turn_id,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=None if isinstance(exc, (ApiError, StoreError)) else exc,
            )
