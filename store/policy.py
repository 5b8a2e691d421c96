"""The policy version the servers serve (`oc:policy:version`) and the stream of served updates
(`oc:policy:updates`, one entry per publication) that the serving side follows."""

from __future__ import annotations

import time

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel

from store import keys
from store.codec import text
from store.connection import open_redis_sync
from store.errors import Records, StoreUnavailable


class PolicyUpdate(BaseModel):
    version: int
    checkpoint: str
    at: float


class MalformedVersion(ValueError):
    """The version key holds something that is not a version number."""


def _version(raw: bytes | None) -> int:
    value = text(raw, "0") or "0"
    if not value.isdigit():
        raise MalformedVersion(f"{keys.POLICY_VERSION} holds {value!r}, not a version number")
    return int(value)


def _update(fields: dict[bytes, bytes]) -> PolicyUpdate | None:
    try:
        return PolicyUpdate(
            version=int(fields[b"version"]), checkpoint=text(fields[b"checkpoint"]), at=float(fields[b"at"])
        )
    except (KeyError, ValueError):
        return None


class PolicyVersions(Records):
    def __init__(self, redis_client: aioredis.Redis):
        self._r = redis_client

    async def served(self) -> int:
        """The version every server has loaded (0: none published yet)."""
        return _version(await self._r.get(keys.POLICY_VERSION))

    async def announce(self, version: int, checkpoint: str) -> None:
        """Every server now serves `version`: the version key and an update entry, together."""
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.set(keys.POLICY_VERSION, str(version))
            pipe.xadd(
                keys.POLICY_UPDATES,
                {"version": str(version), "checkpoint": checkpoint, "at": f"{time.time():.3f}"},
                maxlen=keys.POLICY_UPDATES_MAXLEN,
                approximate=True,
            )
            await pipe.execute()

    async def newest_update(self) -> tuple[str, PolicyUpdate | None]:
        """The id of the newest update entry ("0-0": none yet) and the update (None if malformed or none)."""
        newest = await self._r.xrevrange(keys.POLICY_UPDATES, count=1)
        if not newest:
            return "0-0", None
        eid, fields = newest[0]
        return text(eid), _update(fields)

    async def updates_after(self, entry_id: str, block_ms: int) -> list[tuple[str, PolicyUpdate | None]]:
        """Update entries after `entry_id`, waiting up to `block_ms` for the first; a malformed entry is None."""
        got = await self._r.xread({keys.POLICY_UPDATES: entry_id}, block=block_ms)
        return [(text(eid), _update(fields)) for _, entries in got or [] for eid, fields in entries]


def served_version_now(url: str, wait_s: float) -> int:
    """The served version read synchronously (a process starting up, before any event loop): retries a store that
    does not answer yet for `wait_s`, then raises StoreUnavailable."""
    client = open_redis_sync(url, socket_connect_timeout=1.0, socket_timeout=2.0)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                return _version(client.get(keys.POLICY_VERSION))
            except redis.ConnectionError as exc:
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(f"the store is unavailable: {exc}") from exc
                time.sleep(0.2)
    finally:
        client.close()
