"""The chat request of each turn as the client sent it (`oc:request:<turn id>`): what its prompt is rendered from,
and what a later turn's next state is read from (`NextState.request_key`)."""

from __future__ import annotations

import redis.asyncio as aioredis

from contracts.chat import StoredChatRequest
from store import keys
from store.errors import Records
from store.sealing import Sealer


class ChatRequests(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    async def save(self, turn_id: str, request: StoredChatRequest) -> str:
        key = keys.chat_request(turn_id)
        await self._r.set(key, self._seal.seal(key, request.model_dump_json()), ex=self._ttl_s)
        return key

    async def load(self, turn_id: str) -> StoredChatRequest | None:
        return await self.load_key(keys.chat_request(turn_id))

    async def load_key(self, request_key: str) -> StoredChatRequest | None:
        """By the reference a turn record or a next state carries; None when it is gone (expired)."""
        raw = self._seal.open(request_key, await self._r.get(request_key))
        return None if raw is None else StoredChatRequest.model_validate_json(raw)

    async def delete(self, turn_id: str) -> None:
        await self._r.delete(keys.chat_request(turn_id))
