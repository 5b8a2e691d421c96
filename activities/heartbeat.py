"""The one heartbeat loop of long activities: a killed worker stops beating, and Temporal retries elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating(every_s: float) -> AsyncIterator[None]:
    """Heartbeat every `every_s` while the body runs, so a dead or unheard attempt is noticed within the
    heartbeat timeout."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every_s)

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
