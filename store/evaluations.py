"""Evaluation scores per policy version and set (`oc:eval:scores`, a hash: field `<version>/<set>`, value the
scores as JSON). Written once: the first scores recorded for a version's set stand, so an evaluation retried or
run twice changes nothing. Kept without a TTL: a handful of numbers per evaluated version."""

from __future__ import annotations

import redis.asyncio as aioredis

from contracts.evaluation import SetScores
from store.errors import Records
from store.keys import EVAL_SCORES


def _field(version: int, set_name: str) -> str:
    return f"{version}/{set_name}"


class EvalScoreRecords(Records):
    def __init__(self, redis: aioredis.Redis):
        self._r = redis

    async def record(self, scores: SetScores) -> bool:
        """Keep `scores` unless this version's set has scores already; whether they are the ones kept (True too for
        an activity retried after its first attempt kept them, so the retry still writes their curve points)."""
        field = _field(scores.version, scores.set)
        if await self._r.hsetnx(EVAL_SCORES, field, scores.model_dump_json()):
            return True
        kept = await self._r.hget(EVAL_SCORES, field)
        return kept is not None and SetScores.model_validate_json(kept) == scores

    async def evaluated(self, version: int) -> set[str]:
        """The sets this version has scores for."""
        prefix = f"{version}/"
        return {
            f.decode().removeprefix(prefix) for f in await self._r.hkeys(EVAL_SCORES) if f.decode().startswith(prefix)
        }

    async def last_version(self) -> int | None:
        """The newest version with any scores."""
        versions = [int(f.decode().split("/", 1)[0]) for f in await self._r.hkeys(EVAL_SCORES)]
        return max(versions, default=None)

    async def all(self) -> list[SetScores]:
        """Every version's scores, by version then set."""
        raw = await self._r.hgetall(EVAL_SCORES)
        scores = [SetScores.model_validate_json(v) for v in raw.values()]
        return sorted(scores, key=lambda s: (s.version, s.set))
