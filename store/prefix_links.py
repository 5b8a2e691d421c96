"""`oc:prefix:<user>:<digest>` -> session id: which session a message history (up to an assistant reply) belongs
to, for requests with no session hint (api.prefix_links computes the digests)."""

from __future__ import annotations

import redis.asyncio as aioredis

from store import keys
from store.codec import text
from store.errors import Records


class PrefixLinks(Records):
    def __init__(self, redis: aioredis.Redis):
        self._r = redis

    async def longest(self, user_id: str, digests: list[str]) -> str | None:
        """The session of the last digest in `digests` that has one (digests in order of growing history)."""
        if not digests:
            return None
        hits = await self._r.mget([keys.prefix_link(user_id, d) for d in digests])
        return next((text(hit) for hit in reversed(hits) if hit), None)

    async def link(self, user_id: str, digest: str, session_id: str, ttl_s: int) -> None:
        await self._r.set(keys.prefix_link(user_id, digest), session_id, ex=ttl_s)
