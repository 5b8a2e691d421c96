"""The one heartbeat loop of long activities: a killed worker stops beating, and Temporal retries elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating(every_s: float) -> AsyncIterator[None]:
    """Heartbeat every `every_s` while the body runs, so a dead or unheard attempt is noticed within the
    heartbeat timeout.

    The first beat comes after `every_s`, not at the start: the server counts the heartbeat timeout from the
    attempt's start, so a beat at once only cost a Temporal call and a history write (one in seven of a chat
    turn's), and a turn shorter than `every_s` sends none."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            activity.heartbeat()

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
