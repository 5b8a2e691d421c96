"""`Idempotency-Key`: a retried chat request gets the turn the first one started, never a second turn.

A client that may resend a request (a timeout, a dropped connection) sends the
same `Idempotency-Key` header with each copy: any printable ASCII string of at
most MAX_KEY_CHARS characters, unique per logical request (a UUID will do). Only
this header counts: a client controls it, whereas request-id headers are often
set afresh per attempt by proxies and SDKs.

The turn id is derived from (user, key), so:
  - the Temporal update id (= turn id) attaches a retry to the update the first
    copy started, or hands back its outcome (api.session_gateway);
  - the first copy's session and creation time are remembered under the key, so
    a retry with no session hint lands in the same session and gets the same
    response;
  - once the turn is done its result is kept under the key, so a retry after
    the session continued as new or ended still gets it, without a new turn.
Keys are scoped by user (two users' equal keys never meet) and remembered for
IDEMPOTENCY_TTL_S. A key reused with a different request is a 422. A request
refused before or while running (429, a prompt too long) forgets its key, so
the same request may be sent again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import redis.asyncio as aioredis
from pydantic import BaseModel

from api.errors import ApiError
from contracts.chat import ChatSampling, StoredChatRequest
from contracts.session import TurnResult
from openclaw_rl import redis_keys

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 256
IDEMPOTENCY_TTL_S = 24 * 3600
"""How long a key is remembered: far beyond any client's retry window (Stripe and OpenAI use a day too)."""


def record_key(turn_id: str) -> str:
    return redis_keys.idempotency(turn_id)


class IdempotencyRecord(BaseModel):
    session_id: str
    request_digest: str
    """What the first copy asked for: a copy asking for something else is not a retry."""
    created: int
    """The response's `created`, so every copy gets an identical response."""
    result: TurnResult | None = None
    """Set once the turn is done."""
    attempt: int = 0
    """Turns the key has started. One that failed on a passing outage (a 503) moves it on, so the next copy runs a
    fresh turn instead of getting that failure back from Temporal (which keeps an update's outcome by its id)."""


def key_from(headers: Mapping[str, str]) -> str | None:
    value = headers.get(HEADER)
    if value is None:
        return None
    if not value.strip() or len(value) > MAX_KEY_CHARS or not value.isprintable() or not value.isascii():
        raise ApiError(
            400,
            f"{HEADER} must be 1 to {MAX_KEY_CHARS} printable ASCII characters (got {len(value)} characters)",
            code="invalid_idempotency_key",
            param=HEADER,
        )
    return value


def turn_id_for(user_id: str, key: str) -> str:
    """Same (user, key), same turn id; the user is part of it, so users never share a turn. It also names the key's
    record."""
    return hashlib.sha256(json.dumps(["idempotency", user_id, key]).encode()).hexdigest()[:32]


def attempt_turn_id(key_turn_id: str, attempt: int) -> str:
    """The turn id of the key's `attempt`-th turn (the first is the key's own)."""
    if attempt == 0:
        return key_turn_id
    return hashlib.sha256(f"{key_turn_id}#{attempt}".encode()).hexdigest()[:32]


def request_digest(stored: StoredChatRequest, sampling: ChatSampling) -> str:
    """Over what decides the turn's output; `stream` is left out (a retry may stream where the first did not)."""
    return hashlib.sha256((stored.model_dump_json() + sampling.model_dump_json()).encode()).hexdigest()


async def claim(redis: aioredis.Redis, turn_id: str, mine: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]:
    """The record in force for the key, and whether this request created it (else it is a retry)."""
    key = record_key(turn_id)
    while True:
        if await redis.set(key, mine.model_dump_json(), nx=True, ex=IDEMPOTENCY_TTL_S):
            return mine, True
        raw = await redis.get(key)
        if raw is not None:  # None: forgotten or expired in between, so claim it afresh
            break
    first = IdempotencyRecord.model_validate_json(raw)
    if first.request_digest != mine.request_digest:
        raise ApiError(
            422,
            f"this {HEADER} was already used with a different request; send a new key for a new request",
            code="idempotency_key_reused",
            param=HEADER,
        )
    return first, False


async def save_result(redis: aioredis.Redis, turn_id: str, record: IdempotencyRecord, result: TurnResult) -> None:
    done = record.model_copy(update={"result": result})
    await redis.set(record_key(turn_id), done.model_dump_json(), ex=IDEMPOTENCY_TTL_S)


async def move_on(redis: aioredis.Redis, key_turn_id: str, record: IdempotencyRecord) -> None:
    """The key's turn failed on a passing outage: the next copy with the key starts a fresh turn."""
    nxt = record.model_copy(update={"attempt": record.attempt + 1, "result": None})
    await redis.set(record_key(key_turn_id), nxt.model_dump_json(), ex=IDEMPOTENCY_TTL_S)


async def forget(redis: aioredis.Redis, turn_id: str) -> None:
    await redis.delete(record_key(turn_id))
