"""Bookkeeping activities of session workflows (workflow pool: cheap store writes)."""

from __future__ import annotations

from temporalio import activity

from contracts.session import ARCHIVE_TURNS, ArchiveTurnsInput
from openclaw_rl.settings import Settings
from store.client import Store


class TurnLogActivities:
    def __init__(self, settings: Settings):
        self.store = Store.from_settings(settings)

    @activity.defn(name=ARCHIVE_TURNS.name)
    async def archive_turns(self, inp: ArchiveTurnsInput) -> None:
        await self.store.turn_log.archive(inp.key, inp.records)

    async def aclose(self) -> None:
        await self.store.aclose()
