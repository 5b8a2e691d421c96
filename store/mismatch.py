"""Each trained sample's train-inference mismatch (`oc:mismatch:<sample id>`, contracts.training.SampleMismatch):
written by the train step that measured it, read by the `turns` audit. A few numbers per sample, expiring with the
turn's other data (`redis.data_ttl_s`); a sample trained again (after its version was lost) is written again."""

from __future__ import annotations

import redis.asyncio as aioredis

from contracts.training import SampleMismatch
from store import keys
from store.errors import Records


class MismatchRecords(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int):
        self._r = redis
        self._ttl_s = ttl_s

    async def record(self, figures: list[SampleMismatch]) -> None:
        """One pipelined round trip for a step's samples."""
        if not figures:
            return
        async with self._r.pipeline(transaction=False) as pipe:
            for f in figures:
                pipe.set(keys.sample_mismatch(f.sample_id), f.model_dump_json(), ex=self._ttl_s)
            await pipe.execute()

    async def of_samples(self, sample_ids: list[str | None]) -> list[SampleMismatch | None]:
        """Each sample's figures, None for one not trained (yet), expired, or no sample (None)."""
        named = [s for s in sample_ids if s]
        if not named:
            return [None] * len(sample_ids)
        found = dict(zip(named, await self._r.mget([keys.sample_mismatch(s) for s in named])))
        return [SampleMismatch.model_validate_json(found[s]) if s and found.get(s) else None for s in sample_ids]
