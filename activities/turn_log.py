"""Bookkeeping activities of session workflows (workflow pool: cheap Redis writes)."""

from __future__ import annotations

import json

import redis.asyncio as aioredis
from temporalio import activity

from contracts.session import ARCHIVE_TURNS, ArchiveTurnsInput
from openclaw_rl.settings import Settings


class TurnLogActivities:
    def __init__(self, settings: Settings):
        self.redis = aioredis.from_url(settings.redis.target())
        self.ttl_s = settings.redis.data_ttl_s

    @activity.defn(name=ARCHIVE_TURNS.name)
    async def archive_turns(self, inp: ArchiveTurnsInput) -> None:
        # A plain SET under a key fixed by the segment's first index: a retry rewrites the same value.
        await self.redis.set(inp.key, json.dumps(inp.records), ex=self.ttl_s)

    async def aclose(self) -> None:
        await self.redis.aclose()
