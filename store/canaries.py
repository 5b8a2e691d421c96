"""Candidate adapter versions under judgement (`eval.canary`): a user's new adapter version is proposed as their
candidate instead of replacing their current adapter (store.adapters); the turns it and the incumbent serve meanwhile
are logged for the canary workflow, which promotes it (it becomes the current adapter) or rolls it back. A version
trained while a candidate is judged waits as the user's next, proposed once that is decided. Keyed by the tenant
pseudonym; every write checks the user's tombstone, in one script with the write."""

from __future__ import annotations

import json
import time

import redis.asyncio as aioredis
from pydantic import BaseModel

from store.adapters import AdapterRef
from store.keys import (
    DATA_TTL_S,
    PROGRESS_ANSWERS_TTL_S,
    adapter_candidate,
    adapter_forgotten,
    adapter_go_back,
    adapter_next,
    canary_arms,
    canary_pairs,
    canary_turns,
    forgotten,
    user_adapter,
)
from store.sealing import Sealer

ARMS = ("candidate", "incumbent")

# KEYS: candidate, next, current, tombstone, adapters-forgotten-at, go-back. ARGV: ref json, version, began_at, now,
# the ref's lineage. A version of a line abandoned since (trained before the trainer went back) is stale.
# A forgotten user gets nothing. No candidate pending: this one is, against the current adapter (none: the base).
# One pending: this one waits as the next (a newer next replaces an older). A retried publication of the pending
# candidate or of the waiting next changes nothing; a version not newer than the pending one is stale.
_PROPOSE = """
if redis.call('EXISTS', KEYS[4]) == 1 then return {0, false} end
local at = redis.call('GET', KEYS[5])
if at and tonumber(at) >= tonumber(ARGV[3]) then return {0, false} end
local back = redis.call('GET', KEYS[6])
if back and tonumber(cjson.decode(back)['lineage']) > tonumber(ARGV[5]) then return {3, false} end
local pending = redis.call('HGET', KEYS[1], 'version')
if pending then
  if tonumber(ARGV[2]) == tonumber(pending) then return {1, false} end
  if tonumber(ARGV[2]) < tonumber(pending) then return {3, false} end
  local waiting = redis.call('GET', KEYS[2])
  if waiting and tonumber(cjson.decode(waiting)['version']) >= tonumber(ARGV[2]) then return {2, false} end
  return {2, redis.call('SET', KEYS[2], ARGV[1], 'GET')}
end
local current = redis.call('GET', KEYS[3]) or ''
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'ref', ARGV[1], 'incumbent', current, 'since', ARGV[4])
return {1, false}
"""
# KEYS: candidate, current, next, tombstone, go-back. ARGV: version, promote (1) or roll back (0), now.
# Decides the pending candidate if it is `version` (and its user was not forgotten meanwhile). A promotion: the next,
# if any, becomes the candidate against the new current. A rollback abandons the candidate's line: the trainer goes
# back to the current adapter (the go-back record), and the next, trained on from the candidate, is dropped with it.
# Returns {done, loser ref, new candidate version, dropped next ref}.
_DECIDE = """
if redis.call('EXISTS', KEYS[4]) == 1 then return {0, false, false, false} end
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return {0, false, false, false} end
local ref = redis.call('HGET', KEYS[1], 'ref')
local loser = ref
if ARGV[2] == '1' then
  loser = redis.call('SET', KEYS[2], ref, 'GET') or false
end
redis.call('DEL', KEYS[1])
local nxt = redis.call('GETDEL', KEYS[3])
if ARGV[2] ~= '1' then
  local back = redis.call('GET', KEYS[5])
  local lineage = 1
  if back then lineage = tonumber(cjson.decode(back)['lineage']) + 1 end
  local top = tonumber(ARGV[1])
  if nxt then top = math.max(top, tonumber(cjson.decode(nxt)['version'])) end
  redis.call('SET', KEYS[5], cjson.encode({lineage = lineage, to = redis.call('GET', KEYS[2]) or '', top = top}))
  return {1, loser, false, nxt or false}
end
if not nxt then return {1, loser, false, false} end
local version = cjson.decode(nxt)['version']
local current = redis.call('GET', KEYS[2]) or ''
redis.call('HSET', KEYS[1], 'version', tostring(version), 'ref', nxt, 'incumbent', current, 'since', ARGV[3])
return {1, loser, tostring(version), false}
"""


# KEYS: the turn log, the set of turn ids in it, the tombstone. ARGV: entry, turn id, ttl.
_LOG = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('SADD', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""


# KEYS: the arms hash, the tombstone. ARGV: turn id, share, ttl.
# The turn's arm, chosen once: the n-th turn of the candidacy (from 0) is the candidate's when floor((n+1) * share)
# passes floor(n * share), so after any number of turns the candidate has served floor(n * share) of them, never
# more than its share (a hash of the turn id drifts above it by chance: 11 of 41 turns at a share of 0.25). A retry
# of a turn reads its arm back. A forgotten user's turns take the incumbent, and nothing is written.
_ARM = """
local arm = redis.call('HGET', KEYS[1], ARGV[1])
if arm then return arm end
if redis.call('EXISTS', KEYS[2]) == 1 then return 'incumbent' end
local n = redis.call('HLEN', KEYS[1])
local share = tonumber(ARGV[2])
if math.floor((n + 1) * share + 1e-9) > math.floor(n * share + 1e-9) then arm = 'candidate' else arm = 'incumbent' end
redis.call('HSET', KEYS[1], ARGV[1], arm)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return arm
"""


class LoggedTurn(BaseModel):
    """A turn answered while a candidate was judged: which arm answered it, and how it was sampled (the other
    version answers it the same way)."""

    arm: str
    turn_id: str
    max_tokens: int | None = None


class Candidate(BaseModel):
    ref: AdapterRef
    incumbent: AdapterRef | None
    """What it is judged against: the user's current adapter when it was proposed (None: the base model)."""
    since: float


class Proposed(BaseModel):
    status: str
    """`candidate` (judged from now on, or already: a retry), `next` (waits for the pending one), `stale` (not newer
    than the pending one: nothing written), `forgotten` (nothing written)."""
    replaced_next: AdapterRef | None = None
    """An older next version this one replaced (its loaded copies can go)."""


class Decided(BaseModel):
    done: bool
    """False: `version` was no longer the user's candidate (decided already, or the user was forgotten)."""
    loser: AdapterRef | None = None
    """The adapter that no longer serves anyone: the rolled-back candidate, or the incumbent it replaced."""
    next_version: int | None = None
    """A version that waited and is now the candidate."""
    dropped: AdapterRef | None = None
    """A rollback: the version that waited, trained on from the rolled-back candidate, dropped with it."""


class GoBack(BaseModel):
    """The user's latest rollback, for the trainer: build on `to` (None: the base model) from `lineage` on."""

    lineage: int
    to: AdapterRef | None = None
    top: int = 0
    """The newest version of the abandoned line the store knew of (the candidate, or the next dropped with it)."""


class CanaryRecords:
    def __init__(self, redis: aioredis.Redis, sealer: Sealer | None = None):
        self._r = redis
        self._seal = sealer or Sealer()
        self._propose = redis.register_script(_PROPOSE)
        self._decide = redis.register_script(_DECIDE)
        self._log = redis.register_script(_LOG)
        self._arm = redis.register_script(_ARM)

    async def propose(self, tenant: str, ref: AdapterRef, began_at: float = 0.0) -> Proposed:
        keys = [
            adapter_candidate(tenant), adapter_next(tenant), user_adapter(tenant), forgotten(tenant),
            adapter_forgotten(tenant), adapter_go_back(tenant),
        ]  # fmt: skip
        done, raw = await self._propose(
            keys=keys, args=[ref.model_dump_json(), ref.version, repr(began_at), time.time(), ref.lineage]
        )
        status = {0: "forgotten", 1: "candidate", 2: "next", 3: "stale"}[int(done)]
        return Proposed(status=status, replaced_next=AdapterRef.model_validate_json(raw) if raw else None)

    async def candidate(self, tenant: str) -> Candidate | None:
        raw = await self._r.hgetall(adapter_candidate(tenant))
        if not raw:
            return None
        got = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        return Candidate(
            ref=AdapterRef.model_validate_json(got["ref"]),
            incumbent=AdapterRef.model_validate_json(got["incumbent"]) if got.get("incumbent") else None,
            since=float(got.get("since") or 0),
        )

    async def arm(self, tenant: str, version: int, turn_id: str, share: float) -> str:
        """`candidate` or `incumbent`: which version answers this turn of the user while `version` is judged (the
        candidate exactly `share` of their turns, to the turn; a retry of the turn takes the arm it took)."""
        got = await self._arm(keys=[canary_arms(tenant, version), forgotten(tenant)], args=[turn_id, share, DATA_TTL_S])
        return _text(got)

    async def log_turn(self, tenant: str, version: int, turn: LoggedTurn) -> bool:
        """Log a turn answered while `version` is judged, once (a retried generation of it adds nothing); never for a
        forgotten user."""
        key = canary_turns(tenant, version)
        args = [turn.model_dump_json(), turn.turn_id, DATA_TTL_S]
        return bool(await self._log(keys=[key, f"{key}:seen", forgotten(tenant)], args=args))

    async def turns(self, tenant: str, version: int, start: int, count: int) -> list[LoggedTurn]:
        """The turns answered while `version` was judged, from the `start`th on."""
        raw = await self._r.lrange(canary_turns(tenant, version), start, start + count - 1)
        return [LoggedTurn.model_validate_json(item) for item in raw]

    async def put_pairs(self, tenant: str, version: int, run: str, cursor: int, pairs: dict[str, dict]) -> str:
        """A round's answer pairs by turn id (`candidate`, `incumbent`, `conversation`), for the judge pool."""
        key = canary_pairs(tenant, version, run, cursor)
        await self._r.set(key, self._seal.seal(key, json.dumps(pairs)), ex=PROGRESS_ANSWERS_TTL_S)
        return key

    async def pairs(self, key: str) -> dict[str, dict] | None:
        raw = await self._r.get(key)
        return None if raw is None else json.loads(self._seal.open(key, raw))

    async def decide(self, tenant: str, version: int, promote: bool) -> Decided:
        keys = [
            adapter_candidate(tenant), user_adapter(tenant), adapter_next(tenant), forgotten(tenant),
            adapter_go_back(tenant),
        ]  # fmt: skip
        done, loser, nxt, dropped = await self._decide(
            keys=keys, args=[str(version), "1" if promote else "0", time.time()]
        )
        return Decided(
            done=bool(done),
            loser=AdapterRef.model_validate_json(loser) if loser else None,
            next_version=int(nxt) if nxt else None,
            dropped=AdapterRef.model_validate_json(dropped) if dropped else None,
        )

    async def go_backs(self, tenants: list[str]) -> dict[str, GoBack]:
        """Each user's latest go-back, for those who have one (the trainer applies those it has not yet)."""
        if not tenants:
            return {}
        raw = await self._r.mget([adapter_go_back(t) for t in tenants])
        out = {}
        for tenant, value in zip(tenants, raw):
            if value:
                got = json.loads(_text(value))
                to = got.get("to") or ""
                out[tenant] = GoBack(
                    lineage=int(got["lineage"]),
                    to=AdapterRef.model_validate_json(to) if to else None,
                    top=int(got.get("top") or 0),
                )
        return out

    async def forget(self, tenant: str) -> list[AdapterRef]:
        """Remove the user's candidate, their next version and the turn logs; the adapters named (to unload)."""
        refs = []
        cand = await self.candidate(tenant)
        if cand is not None:
            refs.append(cand.ref)
        nxt = await self._r.getdel(adapter_next(tenant))
        if nxt:
            refs.append(AdapterRef.model_validate_json(nxt))
        await self._r.delete(adapter_candidate(tenant), adapter_go_back(tenant))
        async for key in self._r.scan_iter(match=f"{canary_turns(tenant, 0).split(':v0:')[0]}:v*", count=500):
            await self._r.delete(key)
        return refs


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
