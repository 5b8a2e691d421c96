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
store.keys.IDEMPOTENCY_TTL_S. A key reused with a different request is a 422. A request
refused before or while running (429, a prompt too long) forgets its key, so
the same request may be sent again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

from api.errors import ApiError
from contracts.chat import ChatSampling, StoredChatRequest
from contracts.session import TurnResult
from store.idempotency import IdempotencyRecord, IdempotencyRecords

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 256

__all__ = ["HEADER", "IdempotencyRecord", "attempt_turn_id", "claim", "forget", "key_from", "move_on", "save_result"]


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


async def claim(
    records: IdempotencyRecords, key_turn_id: str, mine: IdempotencyRecord
) -> tuple[IdempotencyRecord, bool]:
    """The record in force for the key, and whether this request created it (else it is a retry)."""
    first, fresh = await records.claim(key_turn_id, mine)
    if not fresh and first.request_digest != mine.request_digest:
        raise ApiError(
            422,
            f"this {HEADER} was already used with a different request; send a new key for a new request",
            code="idempotency_key_reused",
            param=HEADER,
        )
    return first, fresh


async def save_result(
    records: IdempotencyRecords, key_turn_id: str, record: IdempotencyRecord, result: TurnResult
) -> None:
    await records.save(key_turn_id, record.model_copy(update={"result": result}))


async def move_on(records: IdempotencyRecords, key_turn_id: str, record: IdempotencyRecord) -> None:
    """The key's turn failed on a passing outage: the next copy with the key starts a fresh turn."""
    await records.save(key_turn_id, record.model_copy(update={"attempt": record.attempt + 1, "result": None}))


async def forget(records: IdempotencyRecords, key_turn_id: str) -> None:
    await records.forget(key_turn_id)
