"""One chat turn, whichever protocol asked for it: the core every front door shares.

A route (api.chat, api.anthropic_messages, api.openai_responses) reads and validates its own wire format, turns it
into the internal chat form (ChatCompletionRequest, plus the fields that name the session) and calls `start_turn`.
From there every protocol gets the same machinery: the session's workflow, turn classification, next-state pairing,
judging, token-exact samples, the audit log, Idempotency-Key, opt-outs and admission. The route then writes the
TurnResult (or the streamed deltas, `split_deltas`) back in its own format.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Mapping

import structlog
from fastapi import FastAPI
from pydantic import ValidationError
from temporalio.service import RPCError

from api import idempotency, prefix_links
from api.auth import Caller
from api.errors import ApiError, store_error
from api.idempotency import IdempotencyRecord
from api.openai_schema import AssistantMessage, ChatCompletionRequest, Usage
from api.session_identity import (
    InvalidSessionId,
    SessionHint,
    SessionIdentity,
    resolve_identity,
    strip_routing_fields,
)
from api.token_relay import relay_tokens
from contracts.chat import ChatSampling, GenerateOutput, StoredChatRequest, TurnType, tenant_of
from contracts.learning import NextState
from contracts.session import TurnRequest, TurnResult
from contracts.summary import clip
from control.audit import find_turn, is_next_state_of_a_turn
from control.sessions import session_workflow_id
from policy_client.chat import message_text
from policy_client.chat_output import ParsedCompletion, StreamingSplitter, generate_output
from store import keys
from store.errors import StoreError
from store.prefix_links import PrefixLinks

log = structlog.get_logger(__name__)


@dataclass
class Turn:
    """One chat request on its way through: what is stored, what Temporal runs, how the client is answered."""

    user_id: str
    session_id: str
    turn_id: str
    created: int
    model: str
    chat: ChatCompletionRequest
    identity: SessionIdentity
    messages: list[dict[str, Any]]
    stored: StoredChatRequest
    sampling: ChatSampling
    marker: str
    record: IdempotencyRecord | None = None
    """Set when the request carries an Idempotency-Key."""
    key_turn_id: str | None = None
    """The id of the key's record (its first turn's id); `turn_id` is the key's current attempt."""
    train: bool = True
    """False when the caller (its user or its key) opted out of training: the turn is served, never a sample."""

    @property
    def workflow_id(self) -> str:
        return session_workflow_id(self.user_id, self.session_id)


_REFUSED = (400, 429)
"""Statuses of a turn refused as sent (400: the policy refused it; 429: the session admitted no more turns)."""


async def start_turn(
    app: FastAPI,
    caller: Caller,
    headers: Mapping[str, str],
    chat: ChatCompletionRequest,
    *,
    identity_body: Mapping[str, Any],
    hint: SessionHint | None = None,
    protocol: str = "chat",
) -> tuple[Turn, asyncio.Future]:
    """Admit and start the turn `chat` asks for; the future resolves to its TurnResult (at once for a retry of a
    finished turn). `identity_body`: the body fields that name the session (resolve_identity reads them beside the
    messages); `hint`: a session the protocol itself names (a Messages client's metadata, a Responses chain)."""
    key = idempotency.key_from(headers)
    t = await _prepare(app, caller.user_id, headers, identity_body, chat, hint)
    t.train = not await app.state.store.users.request_opted_out(caller.user_id, caller.key_id)
    fresh = True
    if key is not None:
        fresh = await _claim(app, t, key)
        if t.record is not None and t.record.result is None and not fresh:
            t.record.result = await _ran_in_an_earlier_run(app, t)
        if t.record is not None and t.record.result is not None:  # a retry of a finished turn: its answer again
            return t, _finished(t.record.result)
    log.info(
        "chat turn",
        protocol=protocol,
        user=tenant_of(t.user_id),  # a pseudonym: log files are not rewritten when a user is forgotten
        session=t.session_id,
        source=t.identity.source,
        turn_type=t.identity.turn_type.value,
        turn_id=t.turn_id,
        stream=chat.stream,
        retry=not fresh,
    )
    try:
        app.state.admission.acquire(t.user_id, t.workflow_id, t.turn_id)
    except ApiError:
        if key is not None and fresh:  # refused before it ran: the key's record and its index entry go
            await idempotency.forget(app.state.store.idempotency, t.key_turn_id)
            await app.state.store.users.unnote_turn(t.user_id, t.key_turn_id)
        raise
    return t, asyncio.ensure_future(_run(app, t, _turn_request(t)))


async def open_stream(app: FastAPI, t: Turn, update: asyncio.Future) -> tuple[str | None, AsyncIterator[str]]:
    """The turn's first text delta and the rest; an error before the first token is still an HTTP error."""
    tokens = relay_tokens(app.state.store.streams, t.turn_id, update)
    return await anext(tokens, None), tokens


async def split_deltas(
    first: str | None, tokens: AsyncIterator[str], update: asyncio.Future
) -> AsyncIterator[tuple[str, str]]:
    """(reasoning, content) deltas as the turn streams, the last ones from its result (tool-call text held back):
    what every protocol's stream sends before the turn's tool calls and its end."""
    splitter = StreamingSplitter()
    delta = first
    while delta is not None:
        r, c = splitter.push(delta)
        if r or c:
            yield r, c
        delta = await anext(tokens, None)
    result: TurnResult = await asyncio.shield(update)
    out = result.output
    r, c = splitter.finish(ParsedCompletion(content=out.content, reasoning=out.reasoning, tool_calls=out.tool_calls))
    if r or c:
        yield r, c


def validate_chat(body: dict[str, Any]) -> ChatCompletionRequest:
    try:
        return ChatCompletionRequest.model_validate(strip_routing_fields(body))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(422, f"{where or 'body'}: {first['msg']}", param=where or None) from None


def function_tool(name: str, description: str | None, parameters: dict[str, Any] | None) -> dict[str, Any]:
    """A tool of another protocol (Anthropic's, the Responses API's) as the chat completion's function tool."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def translated_chat(chat: dict[str, Any]) -> ChatCompletionRequest:
    """Another protocol's request, translated to a chat completion body, validated: a field the translation carried
    over that the chat completion refuses is the client's error (400), as any other bad field of their request."""
    try:
        return validate_chat(chat)
    except ApiError as exc:
        raise ApiError(400, exc.message, param=exc.param) from None


async def _prepare(
    app: FastAPI,
    user_id: str,
    headers: Mapping[str, str],
    identity_body: Mapping[str, Any],
    chat: ChatCompletionRequest,
    hint: SessionHint | None,
) -> Turn:
    settings = app.state.settings
    messages = [m.for_template() for m in chat.messages]
    try:
        identity = resolve_identity(headers, identity_body, settings.session.side_call_markers, hint=hint)
    except InvalidSessionId as exc:
        raise ApiError(400, str(exc), code="invalid_session_id") from None
    marker = settings.session.internal_context_marker
    return Turn(
        user_id=user_id,
        session_id=identity.session_id
        or await _unhinted_session(app.state.store.prefix_links, user_id, identity, messages, marker),
        turn_id=uuid.uuid4().hex,
        created=int(time.time()),
        model=chat.model or settings.api.model_name,
        chat=chat,
        identity=identity,
        messages=messages,
        stored=StoredChatRequest(messages=messages, tools=chat.template_tools()),
        sampling=chat_sampling(chat),
        marker=marker,
    )


def chat_sampling(chat: ChatCompletionRequest) -> ChatSampling:
    return ChatSampling(
        temperature=1.0 if chat.temperature is None else chat.temperature,
        top_p=1.0 if chat.top_p is None else chat.top_p,
        max_tokens=chat.max_completion_tokens or chat.max_tokens,
        stop=chat.stop_list(),
    )


async def _unhinted_session(
    links: PrefixLinks, user_id: str, identity: SessionIdentity, messages: list[dict[str, Any]], marker: str
) -> str:
    if identity.turn_type is TurnType.SIDE:
        return f"side-{datetime.now(timezone.utc):%Y%m%d}"  # hint-less side calls of a day share one session
    return await prefix_links.find_session(links, user_id, messages, marker) or f"chat-{uuid.uuid4().hex[:16]}"


async def _claim(app: FastAPI, t: Turn, key: str) -> bool:
    """Bind the request to its key's turn; True if it is the first with the key, False for a retry."""
    t.key_turn_id = idempotency.turn_id_for(t.user_id, key)
    await app.state.store.users.note_turn(t.user_id, t.key_turn_id)  # its record is the user's (control.user_data)
    mine = IdempotencyRecord(
        session_id=t.session_id, request_digest=idempotency.request_digest(t.stored, t.sampling), created=t.created
    )
    t.record, fresh = await idempotency.claim(app.state.store.idempotency, t.key_turn_id, mine)
    t.turn_id = idempotency.attempt_turn_id(t.key_turn_id, t.record.attempt)
    # A retry goes where the first copy went, even if it resolved another session (prefix links change meanwhile).
    t.session_id, t.created = t.record.session_id, t.record.created
    return fresh


def _turn_request(t: Turn) -> TurnRequest:
    main = t.identity.turn_type is TurnType.MAIN
    return TurnRequest(
        turn_id=t.turn_id,
        turn_type=t.identity.turn_type,
        side_kind=t.identity.side_kind,
        sampling=t.sampling,
        stream=t.chat.stream,
        prompt_summary=_prompt_summary(t.messages, t.marker),
        message_count=len(t.messages),
        next_state=_next_state(t.messages, t.marker, t.turn_id) if main else None,
        session_done=t.identity.session_done,
        received_at=datetime.now(timezone.utc),
        request_digest=hashlib.sha256(t.stored.model_dump_json().encode()).hexdigest()[:32] if main else None,
    )


async def _run(app: FastAPI, t: Turn, turn: TurnRequest) -> TurnResult:
    """The turn, then its prefix link; runs to the end even if a streaming client leaves."""
    store = app.state.store
    try:
        await store.users.note_turn(t.user_id, t.turn_id, train=t.train)  # before any of the turn's data exists
        await store.requests.save(t.turn_id, t.stored)
        try:
            result = await app.state.gateway.run_turn(
                t.user_id, t.session_id, turn, forgotten=lambda: store.users.is_forgotten(t.user_id)
            )
        except ApiError as exc:
            if exc.status in _REFUSED:
                await _forget_refused(app, t, turn, admitted=exc.status != 429)
            elif exc.code in _PASSING and t.record is not None:  # the turn ran and failed: a fresh one next
                await _move_on(app, t)
            raise
        await _remember(app, t, result)
        return result
    finally:
        app.state.admission.release(t.user_id, t.workflow_id, t.turn_id)


_PASSING = ("policy_unavailable", "store_unavailable", "storage_full")
"""Codes of a turn that ran and failed on a passing outage: a keyed retry runs a fresh turn."""


async def _remember(app: FastAPI, t: Turn, result: TurnResult) -> None:
    """Keep the finished turn's answer under its idempotency key and its prefix link. Both are shortcuts: a store
    that fails them (full, or down) costs a retried request a lookup of the turn and the next request its session
    hint; the client still gets the answer, which Temporal holds."""
    store = app.state.store
    try:
        if t.record is not None:
            await idempotency.save_result(store.idempotency, t.key_turn_id, t.record, result)
        if t.identity.turn_type is TurnType.MAIN:
            reply = assistant_message(result.output).model_dump(exclude_none=True)
            await prefix_links.remember(
                store.prefix_links,
                t.user_id,
                t.messages,
                reply,
                t.session_id,
                t.marker,
                app.state.settings.session.prefix_link_ttl_s,
            )
    except StoreError as exc:
        log.warning(
            "could not keep the finished turn's key record or prefix link",
            turn_id=t.turn_id,
            error=f"{type(exc).__name__}: {exc}",
        )


async def _forget_refused(app: FastAPI, t: Turn, turn: TurnRequest, admitted: bool) -> None:
    """A refused turn leaves nothing behind, except a request an earlier turn took as its next state.

    A main-line request pairs the session's pending turn before its own generation
    starts, so a request refused as too long may still be that turn's next state,
    which its judge reads. `admitted`: the workflow saw the turn (else nothing paired).
    """
    store = app.state.store
    try:
        if t.record is not None:
            await idempotency.forget(store.idempotency, t.key_turn_id)
        if admitted and turn.next_state is not None:
            client = await app.state.gateway.client()
            key = keys.chat_request(t.turn_id)
            if await is_next_state_of_a_turn(client, store, t.user_id, t.session_id, key):
                return  # kept, so indexed: a forget finds it by the user's turn index
        await store.requests.delete(t.turn_id)
        # Nothing of the turn is left, so its index entry goes too. A key's later attempt keeps the key's own entry
        # (`key_turn_id`): it names the first attempt's data.
        await store.users.unnote_turn(t.user_id, t.turn_id)
    except Exception as exc:  # cleanup must never replace the refusal the client is owed; the TTL ends the key
        log.warning("could not clean up a refused turn", turn_id=t.turn_id, error=f"{type(exc).__name__}: {exc}")


async def _ran_in_an_earlier_run(app: FastAPI, t: Turn) -> TurnResult | None:
    """The result of a retried request's turn that finished but was never kept under its key (the API died, or the
    store failed, before it could), rebuilt from the turn's token data. Temporal hands an update's outcome back only
    within one run: after the session continued as new, sending the update again would run the turn a second time.
    None when it did not finish (still running attaches to the same update; failed or never run runs again)."""
    try:
        client = await app.state.gateway.client()
        rec = await find_turn(client, app.state.store, t.user_id, t.session_id, t.turn_id)
        if rec is None or rec.status != "done":
            return None
        tokens = await app.state.store.turns.load(t.turn_id)
        if tokens is None:
            return None
        result = TurnResult(
            turn_index=rec.index,
            turn_id=t.turn_id,
            output=generate_output(
                tokens.response_text,
                tokens.finish_reason,
                call_id_prefix=t.turn_id[:12],
                prompt_tokens=len(tokens.prompt_ids),
                completion_tokens=len(tokens.response_ids),
                weight_version=tokens.weight_version,
                attempt=rec.attempts or 1,
                resumed_at=tokens.resumed_at,
            ),
        )
        await idempotency.save_result(app.state.store.idempotency, t.key_turn_id, t.record, result)
        return result
    except (RPCError, RuntimeError, StoreError, OSError, ValidationError) as exc:  # Temporal, the store, an old record
        # The lookup is a shortcut: without it the retry is sent as an update, as before.
        log.warning("could not look the retried turn up", turn_id=t.turn_id, error=f"{type(exc).__name__}: {exc}")
        return None


async def _move_on(app: FastAPI, t: Turn) -> None:
    """A keyed turn failed on a passing outage (the policy servers away past the generate retries, the store down or
    full): the client's next copy with the same key runs a fresh turn. Unrecorded (the store away or full too), the
    next copy gets this failure again, and records it then."""
    try:
        await idempotency.move_on(app.state.store.idempotency, t.key_turn_id, t.record)
    except StoreError as exc:
        log.warning("could not let the key retry", turn_id=t.turn_id, error=f"{type(exc).__name__}: {exc}")


def _finished(result: TurnResult) -> asyncio.Future:
    done: asyncio.Future = asyncio.get_running_loop().create_future()
    done.set_result(result)
    return done


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
        request_key=keys.chat_request(turn_id),
        message_index=index,
    )


def assistant_message(out: GenerateOutput) -> AssistantMessage:
    calls = [c.to_openai() for c in out.tool_calls] or None
    return AssistantMessage(
        content=out.content if (out.content or not calls) else None, reasoning_content=out.reasoning, tool_calls=calls
    )


def usage(o: GenerateOutput) -> Usage:
    return Usage(
        prompt_tokens=o.prompt_tokens,
        completion_tokens=o.completion_tokens,
        total_tokens=o.prompt_tokens + o.completion_tokens,
    )


def stream_error(exc: Exception) -> ApiError:
    """The error event that ends a stream the turn (or the relay) failed after the response had started."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, StoreError):
        return store_error(exc)
    return ApiError(500, f"internal error ({type(exc).__name__}); the answer is incomplete. See the API log.")
