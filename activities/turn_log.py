"""Bookkeeping activities of session workflows (workflow pool: cheap Redis writes)."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel
from temporalio import activity

from openclaw_rl.settings import Settings


class ArchiveTurnsInput(BaseModel):
    key: str
    records: list[dict[str, Any]]
    """TurnRecord dumps, in index order."""


class TurnLogActivities:
    def __init__(self, settings: Settings):
        self.redis = aioredis.from_url(settings.redis.target())

    @activity.defn(name="archive_turns")
    async def archive_turns(self, inp: ArchiveTurnsInput) -> None:
        # A plain SET under a key fixed by the segment's first index: a retry rewrites the same value.
        await self.redis.set(inp.key, json.dumps(inp.records))
