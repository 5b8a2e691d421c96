"""Slots of the shared env queue: a worker polls for a new episode only while it holds fewer than its capacity.

An environment outlives the activity that opened it, so Temporal's own slot
count (activities in flight) cannot tell a full worker from an idle one. This
supplier counts the environments held plus the `env_open` calls under way, and
waits before polling when they reach `envs.envs_per_worker`: new episodes then
go to the workers with room, and adding workers adds capacity.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)

POLL_S = 0.02


class EnvCapacity(CustomSlotSupplier):
    def __init__(self, capacity: int, held: Callable[[], int]):
        self.capacity = capacity
        self.held = held
        """How many environments the worker holds now (EnvActivities.held)."""
        self._reserved = 0
        self._lock = threading.Lock()  # release_slot may come from the core's thread

    def _take(self) -> SlotPermit | None:
        with self._lock:
            if self._reserved + self.held() >= self.capacity:
                return None
            self._reserved += 1
            return SlotPermit()

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        while (permit := self._take()) is None:
            await asyncio.sleep(POLL_S)
        return permit

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return self._take()

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        with self._lock:
            self._reserved -= 1
