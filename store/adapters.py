"""Which LoRA adapter serves each user (`training.adapters = per_user`): `oc:adapter:<tenant>` holds the current one
(its name on the policy servers, its folder, its version), written when a version publishes it, read by every
generation for that user. Keyed by the tenant pseudonym (contracts.chat.tenant_of), never the user id."""

from __future__ import annotations

import redis.asyncio as aioredis
from pydantic import BaseModel

from store.keys import adapter_forgotten, forgotten, user_adapter

# Record an adapter unless its user was forgotten: the tombstone, or a forget after the adapter began (the marker a
# new key for the same id does not clear). One script, so no forget falls between the check and the write.
_PUBLISH = """
if redis.call('EXISTS', KEYS[2]) == 1 then return {0, false} end
local at = redis.call('GET', KEYS[3])
if at and tonumber(at) >= tonumber(ARGV[2]) then return {0, false} end
return {1, redis.call('SET', KEYS[1], ARGV[1], 'GET')}
"""
# Remove the record and mark when: what a publication racing the forget is checked against.
_FORGET = """
local now = redis.call('TIME')
redis.call('SET', KEYS[2], now[1] .. '.' .. string.format('%06d', tonumber(now[2])))
return redis.call('GETDEL', KEYS[1])
"""


class AdapterRef(BaseModel):
    name: str
    """What the policy servers call it (`lora_path` of a generate request)."""
    path: str
    """Its PEFT folder: what `/load_lora_adapter` loads again on a server that lost it."""
    version: int
    """The user's own version: how many steps their adapter has taken (what their turns' samples are labelled with,
    so that staleness counts their adapter's steps, not other users')."""
    lineage: int = 0
    """The go-backs its adapter had applied when it was trained (eval.canary): a version of a line abandoned since
    is never proposed."""


class Published(BaseModel):
    recorded: bool
    """False: the user was forgotten; nothing was written (the caller takes back what it loaded)."""
    previous: AdapterRef | None = None
    """The adapter it replaced."""


class AdapterRecords:
    def __init__(self, redis: aioredis.Redis):
        self._r = redis
        self._publish = redis.register_script(_PUBLISH)
        self._forget = redis.register_script(_FORGET)

    async def current(self, tenant: str) -> AdapterRef | None:
        raw = await self._r.get(user_adapter(tenant))
        return AdapterRef.model_validate_json(raw) if raw else None

    async def publish(self, tenant: str, ref: AdapterRef, began_at: float = 0.0) -> Published:
        """Make `ref` the user's adapter unless the user was forgotten (their tombstone, or a forget at or after
        `began_at`, the time the trainer began this adapter), checked and written atomically."""
        keys = [user_adapter(tenant), forgotten(tenant), adapter_forgotten(tenant)]
        done, raw = await self._publish(keys=keys, args=[ref.model_dump_json(), repr(began_at)])
        return Published(recorded=bool(done), previous=AdapterRef.model_validate_json(raw) if raw else None)

    async def forget(self, tenant: str) -> AdapterRef | None:
        """Remove the user's record and mark the time (a publication of an adapter begun before it is refused)."""
        keys = [user_adapter(tenant), adapter_forgotten(tenant)]
        raw = await self._forget(keys=keys)
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
