"""Turn records a session archived when it continued as new (`oc:turnlog:<session>:<first index>`): its history
keeps the reference (`ArchivedSegment.key`), the records live here."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from contracts.session import TurnRecord
from store.errors import Records
from store.sealing import Sealer


class TurnLogArchive(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    async def archive(self, key: str, records: list[dict]) -> None:
        """A plain SET under a key fixed by the segment's first index: a retry rewrites the same value."""
        await self._r.set(key, self._seal.seal(key, json.dumps(records)), ex=self._ttl_s)

    async def load(self, segment_keys: list[str]) -> list[TurnRecord]:
        """The records of every segment still kept (an expired one gives none), in one call."""
        if not segment_keys:
            return []
        raws = [self._seal.open(k, raw) for k, raw in zip(segment_keys, await self._r.mget(segment_keys))]
        return [TurnRecord.model_validate(r) for raw in raws if raw for r in json.loads(raw)]
