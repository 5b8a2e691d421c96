"""`POST /v1/responses`: OpenAI's Responses API in front of the same turns as chat completions.

A request is translated into the internal chat form (`instructions` -> a system message, input messages as they
are, `function_call` and `custom_tool_call` items -> an assistant message's tool calls, their outputs -> tool
messages) and runs through api.turn_core; the TurnResult is written back as a Response object (output items
`message`, `function_call`, and `custom_tool_call` for a freeform tool such as Codex's `apply_patch`), or as the
Responses stream of events. Hosted tools (web search, ...) are accepted and not shown to the policy.

Conversation state: with `store` (the default) the turn's conversation is kept (store.response_states) under its
response id, `resp_<turn id>`; a request naming it in `previous_response_id` continues it. A chain is a session:
the first turn's session is every later one's. A response id is looked up for the caller only: another user's,
an expired or a made-up one is a 404, and nothing of such a request is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any, AsyncIterator

import structlog
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from api.auth import Caller, authenticate
from api.errors import ApiError
from api.openai_schema import ChatCompletionRequest
from api.request_body import read_json
from api.responses_schema import CustomTool, FunctionTool, NamespaceTool, ResponsesRequest
from api.session_identity import ROUTING_BODY_FIELDS, SessionHint, header_value
from api.turn_core import (
    Turn,
    assistant_message,
    function_tool,
    open_stream,
    split_deltas,
    start_turn,
    stream_error,
    translated_chat,
)
from contracts.chat import GenerateOutput, tenant_of
from contracts.session import TurnResult
from store.errors import StoreError
from store.response_states import ResponseState

log = structlog.get_logger(__name__)

PATH = "/v1/responses"
router = APIRouter()

_RESPONSE_ID = re.compile(r"^resp_([0-9a-f]{32})$")


@router.post(PATH, include_in_schema=False)
async def responses(request: Request, caller: Caller = Depends(authenticate)) -> Any:
    app = request.app
    body = await read_json(request, app.state.settings.api.max_request_bytes)
    req = validate(body)
    earlier = await _previous(app, caller, req.previous_response_id)
    history = list(earlier.messages) if earlier else []
    history += to_messages(req)
    chat = to_chat(req, history)
    identity_body: dict[str, Any] = {k: body[k] for k in (*ROUTING_BODY_FIELDS, "prompt_cache_key") if k in body}
    identity_body["messages"] = [m.model_dump(exclude_none=True) for m in chat.messages]
    hint = SessionHint(session_id=earlier.session_id, source="previous_response_id") if earlier else None
    t, update = await start_turn(
        app, caller, request.headers, chat, identity_body=identity_body, hint=hint, protocol="openai-responses"
    )
    headers = {"X-Session-Id": header_value(t.session_id)}
    if not req.stream:
        result = await asyncio.shield(update)
        await _keep(app, t, req, history, result.output)
        return JSONResponse(response_object(t, req, result.output), headers=headers)
    first, tokens = await open_stream(app, t, update)
    return StreamingResponse(
        _events(app, t, req, history, first, tokens, update),
        media_type="text/event-stream",
        headers={**headers, "Cache-Control": "no-cache"},
    )


def validate(body: dict[str, Any]) -> ResponsesRequest:
    try:
        return ResponsesRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"{where or 'body'}: {first['msg']}", param=where or None) from None


async def _previous(app: FastAPI, caller: Caller, response_id: str | None) -> ResponseState | None:
    if response_id is None:
        return None
    match = _RESPONSE_ID.match(response_id)
    state = await app.state.store.responses.load(match.group(1)) if match else None
    if state is None or state.owner != tenant_of(caller.user_id):
        raise ApiError(
            404,
            f"previous response {response_id!r} not found: it is not one of this API key's user's stored responses "
            "(or it expired, or was sent with store: false)",
            code="previous_response_not_found",
            param="previous_response_id",
        )
    return state


def to_messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    """This request's input items as chat messages; `function_call` items join the assistant message before them,
    so a history sent back whole reads as the chat form the answer was kept in (api.prefix_links)."""
    if isinstance(req.input, str):
        return [{"role": "user", "content": req.input}]
    out: list[dict[str, Any]] = []
    for item in req.input:
        if item.type == "message":
            role = "system" if item.role == "developer" else item.role
            out.append({"role": role, "content": item.text()})
        elif item.type in ("function_call", "custom_tool_call"):
            arguments = item.arguments if item.type == "function_call" else json.dumps({"input": item.input})
            call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": arguments}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
                if not last["content"]:
                    last["content"] = None
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item.type in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": item.text()})
    return out


def to_chat(req: ResponsesRequest, history: list[dict[str, Any]]) -> ChatCompletionRequest:
    messages = ([{"role": "system", "content": req.instructions}] if req.instructions else []) + history
    if not messages:
        raise ApiError(400, "input: there is nothing to answer (no input items)", param="input")
    chat: dict[str, Any] = {
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stream": req.stream,
    }
    if tools := policy_tools(req):
        chat["tools"] = tools
    if req.tool_choice is not None:
        choice = req.tool_choice
        chat["tool_choice"] = (
            choice if isinstance(choice, str) else {"type": "function", "function": {"name": choice.name}}
        )
    return translated_chat(chat)


def custom_parameters(tool: CustomTool) -> dict[str, Any]:
    """A custom tool's one free-text input as a function's JSON parameters; its format (a grammar) described."""
    fmt = tool.format or {}
    described = "The tool's whole input, free text"
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        described += f", in this {fmt.get('syntax', '')} grammar:\n{fmt['definition']}"
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": described}},
        "required": ["input"],
    }


def policy_tools(req: ResponsesRequest) -> list[dict[str, Any]]:
    """The request's tools as the policy sees them (chat function tools): function tools as they are, a custom tool
    as a function of one string `input`, a namespace's functions by their names; hosted tools are left out."""
    out: list[dict[str, Any]] = []
    for tool in req.tools or []:
        if isinstance(tool, FunctionTool):
            out.append(function_tool(tool.name, tool.description, tool.parameters))
        elif isinstance(tool, CustomTool):
            out.append(function_tool(tool.name, tool.description, custom_parameters(tool)))
        elif isinstance(tool, NamespaceTool):
            out += [function_tool(t.name, t.description, t.parameters) for t in tool.tools]
    return out


def tool_kinds(req: ResponsesRequest) -> dict[str, str]:
    """Tool name -> "custom" or the namespace it came in: how a call of it is written back."""
    kinds: dict[str, str] = {}
    for tool in req.tools or []:
        if isinstance(tool, CustomTool):
            kinds.setdefault(tool.name, "custom")
        elif isinstance(tool, NamespaceTool):
            for t in tool.tools:
                kinds.setdefault(t.name, f"namespace:{tool.name}")
    return kinds


def custom_input(arguments: str) -> str:
    """A custom tool call's free-text input from the policy's function-call arguments (`{"input": ...}`); arguments
    of any other shape are handed over as they are."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(parsed, dict) and isinstance(parsed.get("input"), str):
        return parsed["input"]
    return arguments


async def _keep(
    app: FastAPI, t: Turn, req: ResponsesRequest, history: list[dict[str, Any]], out: GenerateOutput
) -> None:
    """Keep the conversation for a later `previous_response_id` (unless `store: false`)."""
    if not req.store:
        return
    reply = assistant_message(out).model_dump(exclude_none=True)
    reply.pop("reasoning_content", None)
    state = ResponseState(owner=tenant_of(t.user_id), session_id=t.session_id, messages=[*history, reply])
    try:
        await app.state.store.responses.save(t.turn_id, state)
    except StoreError as exc:  # the answer is owed all the same; only continuing by this id is lost
        log.warning("could not keep a response's conversation", turn_id=t.turn_id, error=f"{type(exc).__name__}: {exc}")


def _message_item(t: Turn, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": f"msg_{t.turn_id}", "status": status, "role": "assistant", "content": content}


def _call_item(t: Turn, i: int, call: Any, status: str, kinds: dict[str, str]) -> dict[str, Any]:
    """The call as a `function_call` item, or a `custom_tool_call` for a custom tool (its input: free text); a
    call of a namespace's function names the namespace."""
    kind = kinds.get(call.name, "")
    if kind == "custom":
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{t.turn_id}_{i}",
            "call_id": call.id,
            "name": call.name,
            "input": custom_input(call.arguments) if status == "completed" else "",
            "status": status,
        }
    item = {
        "type": "function_call",
        "id": f"fc_{t.turn_id}_{i}",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if status == "completed" else "",
        "status": status,
    }
    if kind.startswith("namespace:"):
        item["namespace"] = kind.removeprefix("namespace:")
    return item


def output_items(t: Turn, req: ResponsesRequest, out: GenerateOutput) -> list[dict[str, Any]]:
    items = [_message_item(t, out.content, "completed")] if out.content else []
    kinds = tool_kinds(req)
    return items + [_call_item(t, i, c, "completed", kinds) for i, c in enumerate(out.tool_calls)]


def response_object(t: Turn, req: ResponsesRequest, out: GenerateOutput | None) -> dict[str, Any]:
    """The Response; `out` None: one still in progress (the stream's first events)."""
    status = "in_progress" if out is None else ("incomplete" if out.finish_reason == "length" else "completed")
    usage = None
    if out is not None:
        usage = {
            "input_tokens": out.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": out.prompt_tokens + out.completion_tokens,
        }
    return {
        "id": f"resp_{t.turn_id}",
        "object": "response",
        "created_at": t.created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "model": t.model,
        "output": [] if out is None else output_items(t, req, out),
        "parallel_tool_calls": True,
        "previous_response_id": req.previous_response_id,
        "store": req.store,
        "temperature": t.sampling.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": req.tool_choice.model_dump()
        if isinstance(req.tool_choice, BaseModel)
        else req.tool_choice or "auto",
        "tools": [tool.model_dump(exclude_none=True) for tool in req.tools or []],
        "top_p": t.sampling.top_p,
        "truncation": "disabled",
        "usage": usage,
        "metadata": req.metadata or {},
    }


async def _events(
    app: FastAPI,
    t: Turn,
    req: ResponsesRequest,
    history: list[dict[str, Any]],
    first: str | None,
    tokens: AsyncIterator[str],
    update: asyncio.Future,
) -> AsyncIterator[str]:
    """The Responses sequence: response.created, response.in_progress; per output item output_item.added, its
    parts and deltas and their done events, output_item.done; then response.completed (or .incomplete)."""
    seq = 0

    def event(kind: str, **data: Any) -> str:
        nonlocal seq
        seq += 1
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq - 1, **data})}\n\n"

    msg_id, index = f"msg_{t.turn_id}", 0
    try:
        yield event("response.created", response=response_object(t, req, None))
        yield event("response.in_progress", response=response_object(t, req, None))
        text, text_open = "", False
        async for _reasoning, content in split_deltas(first, tokens, update):
            if not content:
                continue
            if not text_open:
                yield event("response.output_item.added", output_index=index, item=_message_item(t, "", "in_progress"))
                part = {"type": "output_text", "text": "", "annotations": []}
                yield event(
                    "response.content_part.added", item_id=msg_id, output_index=index, content_index=0, part=part
                )
                text_open = True
            text += content
            yield event(
                "response.output_text.delta",
                item_id=msg_id,
                output_index=index,
                content_index=0,
                delta=content,
                logprobs=[],
            )
        result: TurnResult = await asyncio.shield(update)
        out = result.output
        if text_open:
            yield event(
                "response.output_text.done", item_id=msg_id, output_index=index, content_index=0, text=text, logprobs=[]
            )
            part = {"type": "output_text", "text": text, "annotations": []}
            yield event("response.content_part.done", item_id=msg_id, output_index=index, content_index=0, part=part)
            yield event("response.output_item.done", output_index=index, item=_message_item(t, text, "completed"))
            index += 1
        kinds = tool_kinds(req)
        for i, call in enumerate(out.tool_calls):
            added, done = _call_item(t, i, call, "in_progress", kinds), _call_item(t, i, call, "completed", kinds)
            yield event("response.output_item.added", output_index=index, item=added)
            if done["type"] == "custom_tool_call":
                where = {"item_id": done["id"], "output_index": index}
                yield event("response.custom_tool_call_input.delta", **where, delta=done["input"])
                yield event("response.custom_tool_call_input.done", **where, input=done["input"])
            else:
                where = {"item_id": done["id"], "output_index": index}
                yield event("response.function_call_arguments.delta", **where, delta=call.arguments)
                yield event("response.function_call_arguments.done", **where, name=call.name, arguments=call.arguments)
            yield event("response.output_item.done", output_index=index, item=done)
            index += 1
        await _keep(app, t, req, history, out)
        final = response_object(t, req, out)
        yield event("response.completed" if final["status"] == "completed" else "response.incomplete", response=final)
    except Exception as exc:  # the response has started: end it with response.failed, never cut it
        failure = stream_error(exc)
        failed = {**response_object(t, req, None), "status": "failed"}
        failed["error"] = {"code": failure.code or "server_error", "message": failure.message}
        yield event("response.failed", response=failed)
        with contextlib.suppress(Exception):
            log.warning(
                "a streamed Responses turn ended with response.failed",
                turn_id=t.turn_id,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=None if isinstance(exc, (ApiError, StoreError)) else exc,
            )
