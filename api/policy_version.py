"""The serving side's view of the policy version: it follows the trainer's update stream.

`publish_weights` appends to `oc:policy:updates` once every policy server has
loaded a new version; this watcher keeps the newest one for `/v1/models` and
logs each update. Redis being away only pauses it.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from store.errors import StoreError
from store.policy import PolicyUpdate, PolicyVersions

log = structlog.get_logger(__name__)

BLOCK_MS = 5_000
RETRY_S = 1.0

__all__ = ["PolicyUpdate", "PolicyVersionWatcher"]


class PolicyVersionWatcher:
    def __init__(self, versions: PolicyVersions):
        self.versions = versions
        self.latest: PolicyUpdate | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="policy-version-watcher")

    async def stop(self) -> None:
        if self._task:
            self._stopping = True  # also ends the loop if the client turns the cancellation into a store error
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
                    last_id, newest = await self.versions.newest_update()
                    if last_id != "0-0":
                        self._apply(newest, announce=False)
                for entry_id, update in await self.versions.updates_after(last_id, BLOCK_MS):
                    last_id = entry_id
                    self._apply(update, announce=True)
            except asyncio.CancelledError:
                raise
            except StoreError as exc:
                if self._stopping:
                    return
                log.debug("policy update stream unavailable; retrying", error=str(exc))
                await asyncio.sleep(RETRY_S)

    def _apply(self, update: PolicyUpdate | None, announce: bool) -> None:
        if update is None:
            log.warning("malformed policy update entry ignored")
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
