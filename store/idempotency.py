"""`oc:idempotency:<key turn id>`: what a chat request's Idempotency-Key bound (api.idempotency says why)."""

from __future__ import annotations

import redis.asyncio as aioredis
from pydantic import BaseModel

from contracts.session import TurnResult
from store import keys
from store.errors import Records
from store.sealing import Sealer


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


class IdempotencyRecords(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int = keys.IDEMPOTENCY_TTL_S, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    async def claim(self, key_turn_id: str, mine: IdempotencyRecord) -> tuple[IdempotencyRecord, bool]:
        """The record in force for the key, and whether this call created it (else a copy came first)."""
        key = keys.idempotency(key_turn_id)
        while True:
            if await self._r.set(key, self._seal.seal(key, mine.model_dump_json()), nx=True, ex=self._ttl_s):
                return mine, True
            raw = self._seal.open(key, await self._r.get(key))
            if raw is not None:  # None: forgotten or expired in between, so claim it afresh
                return IdempotencyRecord.model_validate_json(raw), False

    async def save(self, key_turn_id: str, record: IdempotencyRecord) -> None:
        key = keys.idempotency(key_turn_id)
        await self._r.set(key, self._seal.seal(key, record.model_dump_json()), ex=self._ttl_s)

    async def forget(self, key_turn_id: str) -> None:
        await self._r.delete(keys.idempotency(key_turn_id))
