"""A user's held-out turns and progress reports (contracts.progress; key layout in store.keys): user content, so
sealed under encryption and exported and forgotten with the rest of the user's data. Keyed by the user's
pseudonym (contracts.chat.tenant_of), as everything the workflows carry is."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from contracts.progress import HeldOutTurn, ProgressReport
from store import keys
from store.codec import text
from store.errors import Records
from store.sealing import Sealer

# Written only while the user has no tombstone: a turn judged while its user is being forgotten leaves nothing.
_HOLD_OUT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local added = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
local over = redis.call('HLEN', KEYS[1]) - tonumber(ARGV[3])
return over > 0 and over or (added == 1 and 0 or -2)
"""


class ProgressRecords(Records):
    def __init__(self, redis: aioredis.Redis, sealer: Sealer):
        self._r = redis
        self._seal = sealer

    async def hold_out(self, tenant: str, turn: HeldOutTurn, keep: int) -> bool:
        """Keep the turn for the user's reports (once: a retry writes nothing new), then drop the oldest past `keep`.
        False when the user is forgotten (or being forgotten)."""
        key = keys.user_held_out(tenant)
        value = self._seal.seal(key, turn.model_dump_json())
        got = int(await self._r.eval(_HOLD_OUT, 2, key, keys.forgotten(tenant), turn.turn_id, value, keep))
        if got == -1:
            return False
        if got > 0:
            held = await self.held_out(tenant)
            oldest = sorted(held, key=lambda t: t.at)[:got]
            if oldest:
                await self._r.hdel(key, *[t.turn_id for t in oldest])
        return True

    async def held_out(self, tenant: str) -> list[HeldOutTurn]:
        """The user's held-out turns, oldest first."""
        key = keys.user_held_out(tenant)
        raw = await self._r.hgetall(key)
        turns = [HeldOutTurn.model_validate_json(self._seal.open(key, v)) for v in raw.values()]
        return sorted(turns, key=lambda t: (t.at, t.turn_id))

    async def held_out_count(self, tenant: str) -> int:
        return int(await self._r.hlen(keys.user_held_out(tenant)))

    async def tenants_with_held_out(self) -> list[str]:
        pattern = keys.user_held_out("*")
        found = [text(k) async for k in self._r.scan_iter(match=pattern, count=1000, _type="hash")]
        return sorted(k.split(":")[2] for k in found)

    async def put_answers(self, tenant: str, run: str, answers: dict[str, str]) -> str:
        """The new answers by turn id, for the judge pool; returns their key."""
        key = keys.progress_answers(tenant, run)
        await self._r.set(key, self._seal.seal(key, json.dumps(answers)), ex=keys.PROGRESS_ANSWERS_TTL_S)
        return key

    async def answers(self, key: str) -> dict[str, str] | None:
        raw = await self._r.get(key)
        if raw is None:
            return None
        return json.loads(self._seal.open(key, raw))

    async def add_report(self, report: ProgressReport, keep: int) -> bool:
        """False when the user is forgotten meanwhile (nothing written)."""
        tenant = report.tenant
        key = keys.user_progress(tenant)
        if await self._r.exists(keys.forgotten(tenant)):
            return False
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.lpush(key, self._seal.seal(key, report.model_dump_json()))
            pipe.ltrim(key, 0, keep - 1)
            await pipe.execute()
        return True

    async def reports(self, tenant: str, limit: int = 1000) -> list[ProgressReport]:
        """Newest first."""
        key = keys.user_progress(tenant)
        raw = await self._r.lrange(key, 0, limit - 1)
        return [ProgressReport.model_validate_json(self._seal.open(key, v)) for v in raw]

    async def latest(self, tenant: str) -> ProgressReport | None:
        found = await self.reports(tenant, limit=1)
        return found[0] if found else None

    async def forget(self, tenant: str) -> int:
        """Delete the user's held-out turns, reports and any answers in flight; returns how many keys went."""
        names = [keys.user_held_out(tenant), keys.user_progress(tenant)]
        names += [k async for k in self._r.scan_iter(match=keys.progress_answers(tenant, "*"), count=1000)]
        return int(await self._r.delete(*names))
