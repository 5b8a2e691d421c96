"""API keys: each bound to a user id, stored only as a peppered hash.

A key is `ocrl-<key id>-<secret>`; the key id is public (listed, revoked by),
the secret is shown once at creation.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timezone

import redis.asyncio as aioredis
from pydantic import BaseModel

from openclaw_rl import redis_keys

USER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_KEY = re.compile(r"^ocrl-([0-9a-f]{12})-([A-Za-z0-9_-]{20,})$")


class KeyRecord(BaseModel):
    key_id: str
    user_id: str
    created_at: datetime
    revoked_at: datetime | None = None


class InvalidUserId(ValueError):
    pass


class KeyStore:
    def __init__(self, redis: aioredis.Redis, pepper: str):
        self.redis = redis
        self.pepper = pepper.encode()

    def _hash(self, key: str) -> str:
        return hmac.new(self.pepper, key.encode(), hashlib.sha256).hexdigest()

    async def create(self, user_id: str) -> tuple[KeyRecord, str]:
        if not USER_ID.match(user_id):
            raise InvalidUserId(
                f"user id {user_id!r} must be 1-64 characters of letters, digits, '_', '.', '@' or '-', "
                "starting with a letter or digit"
            )
        key_id = secrets.token_hex(6)
        key = f"ocrl-{key_id}-{secrets.token_urlsafe(24)}"
        rec = KeyRecord(key_id=key_id, user_id=user_id, created_at=datetime.now(timezone.utc))
        digest = self._hash(key)
        async with self.redis.pipeline(transaction=True) as p:
            p.set(redis_keys.api_key(digest), rec.model_dump_json())
            p.hset(redis_keys.API_KEY_INDEX, key_id, digest)
            await p.execute()
        return rec, key

    async def lookup(self, key: str) -> KeyRecord | None:
        """The key's record (revoked ones too), or None for a key we never issued."""
        if not _KEY.match(key):
            return None
        raw = await self.redis.get(redis_keys.api_key(self._hash(key)))
        return KeyRecord.model_validate_json(raw) if raw else None

    async def list(self) -> list[KeyRecord]:
        digests = await self.redis.hvals(redis_keys.API_KEY_INDEX)
        if not digests:
            return []
        raws = await self.redis.mget([redis_keys.api_key(d.decode()) for d in digests])
        recs = [KeyRecord.model_validate_json(r) for r in raws if r]
        return sorted(recs, key=lambda r: r.created_at)

    async def revoke(self, key_id: str) -> KeyRecord | None:
        digest = await self.redis.hget(redis_keys.API_KEY_INDEX, key_id)
        if digest is None:
            return None
        k = redis_keys.api_key(digest.decode())
        rec = KeyRecord.model_validate_json(await self.redis.get(k))
        if rec.revoked_at is None:
            rec.revoked_at = datetime.now(timezone.utc)
            await self.redis.set(k, rec.model_dump_json())
        return rec
