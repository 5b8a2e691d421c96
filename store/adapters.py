"""Which LoRA adapter serves each user (`training.adapters = per_user`): `oc:adapter:<tenant>` holds the current one
(its name on the policy servers, its folder, its version), written when a version publishes it, read by every
generation for that user. Keyed by the tenant pseudonym (contracts.chat.tenant_of), never the user id."""

from __future__ import annotations

import redis.asyncio as aioredis
from pydantic import BaseModel

from store.keys import forgotten, user_adapter


class AdapterRef(BaseModel):
    name: str
    """What the policy servers call it (`lora_path` of a generate request)."""
    path: str
    """Its PEFT folder: what `/load_lora_adapter` loads again on a server that lost it."""
    version: int
    """The user's own version: how many steps their adapter has taken (what their turns' samples are labelled with,
    so that staleness counts their adapter's steps, not other users')."""


class AdapterRecords:
    def __init__(self, redis: aioredis.Redis):
        self._r = redis

    async def current(self, tenant: str) -> AdapterRef | None:
        raw = await self._r.get(user_adapter(tenant))
        return AdapterRef.model_validate_json(raw) if raw else None

    async def publish(self, tenant: str, ref: AdapterRef) -> AdapterRef | None:
        """Make `ref` the user's adapter; returns the one it replaces."""
        raw = await self._r.set(user_adapter(tenant), ref.model_dump_json(), get=True)
        return AdapterRef.model_validate_json(raw) if raw else None

    async def forget(self, tenant: str) -> AdapterRef | None:
        raw = await self._r.getdel(user_adapter(tenant))
        return AdapterRef.model_validate_json(raw) if raw else None

    async def owner_forgotten(self, tenant: str) -> bool:
        """The user behind `tenant` was forgotten (their tombstone, store.user_data): their adapter must go."""
        return bool(await self._r.exists(forgotten(tenant)))

    async def all(self) -> dict[str, AdapterRef]:
        """Every user's current adapter, by tenant pseudonym (`train status`)."""
        out = {}
        async for key in self._r.scan_iter(match=user_adapter("*"), count=500):
            raw = await self._r.get(key)
            if raw:
                name = key.decode() if isinstance(key, bytes) else key
                out[name.rsplit(":", 1)[1]] = AdapterRef.model_validate_json(raw)
        return out
