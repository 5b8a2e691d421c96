"""The serving side's view of the policy version: it follows the trainer's update stream.

`publish_weights` appends to `oc:policy:updates` once every policy server has
loaded a new version; this watcher keeps the newest one for `/v1/models` and
logs each update. Redis being away only pauses it.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis
import structlog
from pydantic import BaseModel
from redis.exceptions import RedisError

from openclaw_rl import redis_keys

log = structlog.get_logger(__name__)

BLOCK_MS = 5_000
RETRY_S = 1.0


class PolicyUpdate(BaseModel):
    version: int
    checkpoint: str
    at: float


class PolicyVersionWatcher:
    def __init__(self, redis: aioredis.Redis):
        self.redis = redis
        self.latest: PolicyUpdate | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="policy-version-watcher")

    async def stop(self) -> None:
        if self._task:
            self._stopping = True  # also ends the loop if the client turns the cancellation into a RedisError
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _follow(self) -> None:
        last_id = None
        while not self._stopping:
            try:
                if last_id is None:  # start from the newest entry (there may be none yet)
                    newest = await self.redis.xrevrange(redis_keys.POLICY_UPDATES, count=1)
                    last_id = newest[0][0] if newest else b"0-0"
                    for _, fields in newest:
                        self._apply(fields, announce=False)
                got = await self.redis.xread({redis_keys.POLICY_UPDATES: last_id}, block=BLOCK_MS)
                for _, entries in got or []:
                    for entry_id, fields in entries:
                        last_id = entry_id
                        self._apply(fields, announce=True)
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                if self._stopping:
                    return
                log.debug("policy update stream unavailable; retrying", error=str(exc))
                await asyncio.sleep(RETRY_S)

    def _apply(self, fields: dict[bytes, bytes], announce: bool) -> None:
        try:
            update = PolicyUpdate(
                version=int(fields[b"version"]), checkpoint=fields[b"checkpoint"].decode(), at=float(fields[b"at"])
            )
        except (KeyError, ValueError) as exc:
            log.warning("malformed policy update entry ignored", error=str(exc))
            return
        previous = self.latest
        if previous is not None and (update.version, update.checkpoint) == (previous.version, previous.checkpoint):
            return  # a retried publication repeats its entry
        # The stream's order is what the servers did: a lower version after a higher one is a rollback they now
        # serve (an operator restored an older checkpoint), and the API must say so rather than keep the old number.
        self.latest = update
        if previous is not None and update.version < previous.version:
            log.warning(
                "policy rolled back", version=update.version, was=previous.version, checkpoint=update.checkpoint
            )
        elif announce:
            log.info(
                "policy updated",
                version=update.version,
                checkpoint=update.checkpoint,
                lag_s=round(time.time() - update.at, 3),
            )
