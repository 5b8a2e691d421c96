"""API keys, stored only as peppered hashes: `oc:apikey:<hash>` holds the key's record, `oc:apikeys` maps each
public key id to its hash (for listing and revoking). Hashing and the key format are control.api_keys'."""

from __future__ import annotations

from datetime import datetime

import redis.asyncio as aioredis
from pydantic import BaseModel

from contracts.chat import tenant_of
from store import keys
from store.codec import text
from store.errors import Records


class KeyRecord(BaseModel):
    key_id: str
    user_id: str
    created_at: datetime
    revoked_at: datetime | None = None


class ApiKeyRecords(Records):
    def __init__(self, redis: aioredis.Redis):
        self._r = redis

    async def add(self, digest: str, record: KeyRecord) -> None:
        async with self._r.pipeline(transaction=True) as p:
            p.set(keys.api_key(digest), record.model_dump_json())
            p.hset(keys.API_KEY_INDEX, record.key_id, digest)
            p.set(keys.user_name(tenant_of(record.user_id)), record.user_id)  # store.user_data's name record
            await p.execute()

    async def by_digest(self, digest: str) -> KeyRecord | None:
        raw = await self._r.get(keys.api_key(digest))
        return KeyRecord.model_validate_json(raw) if raw else None

    async def digest_of(self, key_id: str) -> str | None:
        raw = await self._r.hget(keys.API_KEY_INDEX, key_id)
        return None if raw is None else text(raw)

    async def replace(self, digest: str, record: KeyRecord) -> None:
        await self._r.set(keys.api_key(digest), record.model_dump_json())

    async def all(self) -> list[KeyRecord]:
        digests = await self._r.hvals(keys.API_KEY_INDEX)
        if not digests:
            return []
        raws = await self._r.mget([keys.api_key(text(d)) for d in digests])
        return [KeyRecord.model_validate_json(r) for r in raws if r]

    async def delete(self, key_ids: list[str]) -> int:
        """Remove keys outright (a forgotten user's: their records name the user); returns how many there were."""
        gone = 0
        for key_id in key_ids:
            digest = await self.digest_of(key_id)
            async with self._r.pipeline(transaction=True) as p:
                if digest is not None:
                    p.delete(keys.api_key(digest))
                p.hdel(keys.API_KEY_INDEX, key_id)
                *_, removed = await p.execute()
            gone += int(removed)
        return gone
