"""`oc:response:<turn id>`: the conversation a Responses API turn ended with, which a later request continues by
naming it in `previous_response_id` (api.openai_responses). Keyed by turn id, so a forget finds it through the
user's turn index like the turn's other data; sealed, since it holds the conversation."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel

from store import keys
from store.errors import Records
from store.sealing import Sealer


class ResponseState(BaseModel):
    owner: str
    """The tenant pseudonym of the user whose turn it was: another user's request never continues it."""
    session_id: str
    """The session the chain's turns belong to (a chain is a session)."""
    messages: list[dict[str, Any]]
    """The conversation in chat form, the answer included, without the request's `instructions` (the Responses
    API does not carry them over)."""


class ResponseStates(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    async def save(self, turn_id: str, state: ResponseState) -> None:
        key = keys.response_state(turn_id)
        await self._r.set(key, self._seal.seal(key, state.model_dump_json()), ex=self._ttl_s)

    async def load(self, turn_id: str) -> ResponseState | None:
        key = keys.response_state(turn_id)
        raw = self._seal.open(key, await self._r.get(key))
        return None if raw is None else ResponseState.model_validate_json(raw)
