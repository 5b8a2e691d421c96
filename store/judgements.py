"""What judging a turn leaves behind: its judgement for the audit (`oc:judge:<turn id>`), the per-version record
streams (`oc:records:<source>:v<version>`, the audit's copy of every judged turn), and the per-session flag of the
at-least-one rule (`oc:effective:<session key>`). All are written with the sample, by one publication
(`judged_turn_writes` + `SampleStreams.publish_once`). With encryption keys the judgement and its records are
sealed (they hold the judge's hint and its representative output): the record bound to its stream and sample id."""

from __future__ import annotations

import redis.asyncio as aioredis
from pydantic import BaseModel

from contracts.learning import JudgementRecord
from store import keys
from store.codec import text
from store.errors import Records
from store.samples import AlsoWrite, entry_context
from store.sealing import Sealer


class JudgedRecord(BaseModel):
    at: float
    """When it was written (the stream entry's time, seconds since the epoch)."""
    record: JudgementRecord


def judged_turn_writes(record: JudgementRecord, source: str, session_key: str, effective: bool) -> list[AlsoWrite]:
    """What lands with a judged turn's sample: its record, its judgement, and the session's flag if it counts."""
    version = record.policy_version or "unknown"
    body = record.model_dump_json()
    writes = [
        AlsoWrite(op="record", key=keys.record_stream(source, version), value=body, sealed=True),
        AlsoWrite(op="set", key=keys.judgement(record.turn_id), value=body, sealed=True),
    ]
    if effective:
        writes.append(AlsoWrite(op="set", key=keys.session_effective(session_key), value=record.sample_id))
    return writes


def record_json(stream_key: str, fields: dict[bytes, bytes], sealer: Sealer) -> bytes:
    """A record stream entry's record as JSON (opened if sealed)."""
    context = entry_context(stream_key, text(fields.get(b"id", b"")))
    raw = sealer.open(context, fields[b"record"])
    return raw.encode() if isinstance(raw, str) else raw


class Judgements(Records):
    def __init__(self, redis: aioredis.Redis, sealer: Sealer | None = None):
        self._r = redis
        self._seal = sealer or Sealer()

    async def of_turns(self, turn_ids: list[str]) -> list[JudgementRecord | None]:
        """Each turn's judgement, None for a turn not judged (yet)."""
        if not turn_ids:
            return []
        names = [keys.judgement(t) for t in turn_ids]
        raws = [self._seal.open(k, r) for k, r in zip(names, await self._r.mget(names))]
        return [JudgementRecord.model_validate_json(r) if r else None for r in raws]

    async def session_has_effective_sample(self, session_key: str) -> bool:
        return bool(await self._r.exists(keys.session_effective(session_key)))

    async def claim_at_least_one(self, session_key: str, sample_id: str, ttl_s: int) -> bool:
        """Take the session's at-least-one slot for `sample_id`, atomically: True if it is this sample's (taken now,
        or by an earlier attempt of the same sample), False if another sample of the session has it."""
        key = keys.session_effective(session_key)
        if await self._r.set(key, sample_id, nx=True, ex=ttl_s):
            return True
        return (await self._r.get(key)) == sample_id.encode()

    async def records(self, source: str, version: str | None = None) -> list[JudgedRecord]:
        """The record streams of `source` (one version, or every version), oldest first within each."""
        if version is not None:
            names = [keys.record_stream(source, version)]
        else:
            names = [text(k) async for k in self._r.scan_iter(keys.record_stream(source, "*"))]
        out = []
        for name in names:
            for eid, fields in await self._r.xrange(name):
                at = int(text(eid).split("-")[0]) / 1000
                out.append(
                    JudgedRecord(
                        at=at, record=JudgementRecord.model_validate_json(record_json(name, fields, self._seal))
                    )
                )
        return out
