"""What the store keeps to honour a user's rights over their data (control.user_data says what is done with it):

- `oc:user:<pseudonym>:turns`: the ids of the user's chat turns, written with each turn's request; a turn id names
  every per-turn key (request, token data, stream, teacher log-probs, judgement, idempotency record);
- `oc:user:<pseudonym>:groups`: the ids of the client-driven task groups the user opened (`/v1/episodes`); every
  key of a group's episodes holds its id in its name (`group_patterns`);
- `oc:notrain:<turn id>`: a turn an opted-out user or key sent (served, never made a sample);
- `oc:optout:users` / `oc:optout:keys`: who opted out of training;
- `oc:forgotten:<pseudonym>`: a forgotten user's tombstone (when, nothing else);
- `oc:user-name:<pseudonym>`: the user id, written with a key and with the user's turns and groups, deleted by the
  forget: how the CLI shows names where Temporal's workflow ids and `OpenclawUser` hold pseudonyms.

The pseudonym is `contracts.chat.tenant_of(user_id)`: none of these keys names the user in clear.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import redis.asyncio as aioredis
import structlog
from redis.exceptions import ResponseError

from contracts.chat import tenant_of
from openclaw_rl.encryption import DecryptError
from store import keys
from store.codec import text
from store.errors import Records
from store.judgements import record_json
from store.sealing import Sealer

log = structlog.get_logger(__name__)

PER_TURN = (
    keys.chat_request,
    keys.turn_data,
    keys.token_stream,
    keys.stream_owner,
    keys.teacher_logprobs,
    keys.judgement,
    keys.idempotency,
    keys.no_train,
    keys.response_state,
)
"""Every key named by a chat turn's id."""


def user_patterns(user_id: str) -> list[str]:
    """Keys whose names hold the user's session workflow ids (`session/<pseudonym>/...`, or `session/<user id>/...`
    for a session started before ids were pseudonyms: control.sessions) or the user id: archived turn logs, the
    at-least-one flags, the publication markers, trained samples' mismatch figures and prefix links. User ids are
    letters, digits, `_.@-` (control.api_keys.USER_ID) and pseudonyms `u-<hex>`, nothing a SCAN pattern reads as a
    wildcard."""
    out = [keys.prefix_link(user_id, "*")]
    for session in (f"session/{tenant_of(user_id)}/", f"session/{user_id}/"):
        out += [
            keys.turn_log_segment(session + "*", 0)[: -len(":0")],
            keys.session_effective(session + "*"),
            keys.sample_published(session + "*"),
            keys.sample_mismatch(session + "*"),
        ]
    return out


def group_patterns(group_id: str) -> list[str]:
    """Keys of a client-driven group's episodes: they all hold the group id in their names (episode data
    `oc:ep:episode/<group>/...`, step token data `oc:turn:episode/<group>/...`, publication markers, and the
    requests of its model calls, `oc:request:<group>.<index>.<id>`). Group ids are `client-<hex>`: no wildcard."""
    return [f"{keys.PREFIX}:*{group_id}/*", f"{keys.PREFIX}:*{group_id}.*"]


# XDEL only marks a stream entry deleted: its bytes stay in the stream's node (and in every snapshot of it) until
# the whole node goes. This rebuilds the stream from its live entries, with the same ids, TTL and last id, and each
# consumer group with its last delivered id and its pending entries (those still there; delivery counts restart).
_COMPACT_STREAM = """
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return 0 end
local ttl = redis.call('PTTL', key)
local entries = redis.call('XRANGE', key, '-', '+')
local function fields(flat)
  local out = {}
  for i = 1, #flat, 2 do out[flat[i]] = flat[i + 1] end
  return out
end
local last_id = fields(redis.call('XINFO', 'STREAM', key))['last-generated-id']
local live, prev = {}, {}
for i, e in ipairs(entries) do
  live[e[1]] = true
  prev[e[1]] = i > 1 and entries[i - 1][1] or '0-0'
end
local groups = {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
  local info = fields(g)
  local pending = {}
  if tonumber(info['pending']) > 0 then
    for _, p in ipairs(redis.call('XPENDING', key, info['name'], '-', '+', info['pending'])) do
      if live[p[1]] then pending[#pending + 1] = {p[1], p[2]} end
    end
  end
  groups[#groups + 1] = {info['name'], info['last-delivered-id'], pending}
end
redis.call('DEL', key)
for _, e in ipairs(entries) do redis.call('XADD', key, e[1], unpack(e[2])) end
for _, g in ipairs(groups) do
  redis.call('XGROUP', 'CREATE', key, g[1], '0', 'MKSTREAM')
  for _, p in ipairs(g[3]) do
    redis.call('XGROUP', 'SETID', key, g[1], prev[p[1]])
    redis.call('XREADGROUP', 'GROUP', g[1], '__compacting', 'COUNT', 1, 'STREAMS', key, '>')
    redis.call('XCLAIM', key, g[1], p[2], 0, p[1], 'JUSTID')
  end
  redis.call('XGROUP', 'SETID', key, g[1], g[2])
  redis.call('XGROUP', 'DELCONSUMER', key, g[1], '__compacting')
end
if redis.call('EXISTS', key) == 1 then
  redis.call('XSETID', key, last_id)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
return #entries
"""


class UserRecords(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()  # record streams may be sealed: forgetting reads whose they are
        self._compact = redis.register_script(_COMPACT_STREAM)

    async def compact_stream(self, key: str) -> None:
        """Rebuild a stream entries were deleted from, so their bytes are gone from memory and the next snapshot
        (the append-only file's rewrite) too."""
        await self._compact(keys=[key])

    # ---- written where the data is written ----
    async def note_turn(self, user_id: str, turn_id: str, train: bool = True) -> None:
        """`turn_id` is one of the user's (and, `train` False, one that must never become a sample)."""
        index = keys.user_turns(tenant_of(user_id))
        async with self._r.pipeline(transaction=True) as p:
            p.sadd(index, turn_id)
            p.expire(index, self._ttl_s)
            p.set(keys.user_name(tenant_of(user_id)), user_id)  # users whose key predates the name records too
            if not train:
                p.set(keys.no_train(turn_id), "1", ex=self._ttl_s)
            await p.execute()

    async def unnote_turn(self, user_id: str, turn_id: str) -> None:
        """Undo `note_turn` for a turn refused before it was served (none of its data is kept): a refused request
        leaves nothing behind, its index entry included (else every refusal would grow the index)."""
        async with self._r.pipeline(transaction=True) as p:
            p.srem(keys.user_turns(tenant_of(user_id)), turn_id)  # the set's last member gone: the key is too
            p.delete(keys.no_train(turn_id))
            await p.execute()

    async def note_group(self, user_id: str, group_id: str) -> None:
        """`group_id` is a client-driven task group the user opened."""
        index = keys.user_groups(tenant_of(user_id))
        async with self._r.pipeline(transaction=True) as p:
            p.sadd(index, group_id)
            p.expire(index, self._ttl_s)
            p.set(keys.user_name(tenant_of(user_id)), user_id)
            await p.execute()

    async def names_of(self, tenants: Iterable[str]) -> dict[str, str]:
        """pseudonym -> user id, for the pseudonyms whose user still exists (a forgotten one's record is gone)."""
        wanted = sorted(set(tenants))
        if not wanted:
            return {}
        found = await self._r.mget([keys.user_name(t) for t in wanted])
        return {t: text(v) for t, v in zip(wanted, found) if v is not None}

    async def group_ids(self, user_id: str) -> list[str]:
        return sorted(text(g) for g in await self._r.smembers(keys.user_groups(tenant_of(user_id))))

    async def turn_ids(self, user_id: str) -> list[str]:
        return sorted(text(t) for t in await self._r.smembers(keys.user_turns(tenant_of(user_id))))

    # ---- opting out ----
    async def set_user_opt_out(self, user_id: str, out: bool) -> None:
        if out:
            await self._r.sadd(keys.OPT_OUT_USERS, tenant_of(user_id))
        else:
            await self._r.srem(keys.OPT_OUT_USERS, tenant_of(user_id))

    async def set_key_opt_out(self, key_ids: Iterable[str], out: bool) -> None:
        ids = list(key_ids)
        if ids:
            await (self._r.sadd if out else self._r.srem)(keys.OPT_OUT_KEYS, *ids)

    async def user_opted_out(self, user_id: str) -> bool:
        return bool(await self._r.sismember(keys.OPT_OUT_USERS, tenant_of(user_id)))

    async def keys_opted_out(self, key_ids: list[str]) -> list[str]:
        if not key_ids:
            return []
        flags = await self._r.smismember(keys.OPT_OUT_KEYS, key_ids)
        return [k for k, f in zip(key_ids, flags) if f]

    async def request_opted_out(self, user_id: str, key_id: str) -> bool:
        """A request of this user with this key must not become a sample."""
        async with self._r.pipeline(transaction=False) as p:
            p.sismember(keys.OPT_OUT_USERS, tenant_of(user_id))
            p.sismember(keys.OPT_OUT_KEYS, key_id)
            return any(await p.execute())

    async def turn_opted_out(self, turn_id: str) -> bool:
        return bool(await self._r.exists(keys.no_train(turn_id)))

    async def training_refused(self, user_id: str, turn_id: str) -> bool:
        """The turn must not become a sample: its request was opted out, or its user is now."""
        async with self._r.pipeline(transaction=False) as p:
            p.exists(keys.no_train(turn_id))
            p.sismember(keys.OPT_OUT_USERS, tenant_of(user_id))
            return any(await p.execute())

    # ---- forgetting ----
    async def forgotten_at(self, user_id: str) -> float | None:
        raw = await self._r.get(keys.forgotten(tenant_of(user_id)))
        return None if raw is None else float(text(raw))

    async def is_forgotten(self, user_id: str) -> bool:
        return bool(await self._r.exists(keys.forgotten(tenant_of(user_id))))

    async def tombstone(self, user_id: str) -> float:
        """Mark the user forgotten (the first time only); returns when they were."""
        key = keys.forgotten(tenant_of(user_id))
        await self._r.set(key, f"{time.time():.3f}", nx=True)
        return float(text(await self._r.get(key)))

    async def clear_tombstone(self, user_id: str) -> None:
        """A new key for a forgotten id: a new user under the old name."""
        await self._r.delete(keys.forgotten(tenant_of(user_id)))

    async def forget_turns(self, user_id: str) -> int:
        """Delete every per-turn key of the user's turns, and the index itself; returns the keys deleted."""
        turn_ids = await self.turn_ids(user_id)
        deleted = 0
        for i in range(0, len(turn_ids), 200):
            names = [f(t) for t in turn_ids[i : i + 200] for f in PER_TURN]
            deleted += int(await self._r.delete(*names))
        deleted += int(await self._r.delete(keys.user_turns(tenant_of(user_id))))
        return deleted

    async def forget_named(self, user_id: str) -> int:
        """Delete the keys whose names hold the user id or their sessions' ids (`user_patterns`), and the record
        mapping their pseudonym to their id; returns how many."""
        deleted = int(await self._r.delete(keys.user_name(tenant_of(user_id))))
        for pattern in user_patterns(user_id):
            batch = [k async for k in self._r.scan_iter(match=pattern, count=1000)]
            for i in range(0, len(batch), 500):
                deleted += int(await self._r.delete(*batch[i : i + 500]))
        return deleted

    async def forget_groups(self, user_id: str, group_ids: Iterable[str]) -> int:
        """Delete every key of the groups' episodes (`group_patterns`) and the user's group index; returns how
        many keys went."""
        deleted = 0
        for group_id in group_ids:
            for pattern in group_patterns(group_id):
                batch = [k async for k in self._r.scan_iter(match=pattern, count=1000)]
                for i in range(0, len(batch), 500):
                    deleted += int(await self._r.delete(*batch[i : i + 500]))
        deleted += int(await self._r.delete(keys.user_groups(tenant_of(user_id))))
        return deleted

    async def forget_opt_outs(self, user_id: str, key_ids: list[str]) -> None:
        await self.set_user_opt_out(user_id, False)
        await self.set_key_opt_out(key_ids, False)

    async def forget_records(self, user_id: str) -> int:
        """Delete the user's entries from the judged-turn record streams; returns how many."""
        deleted, unreadable = 0, 0
        async for name in self._r.scan_iter(match=keys.record_stream("*", "*"), _type="stream"):
            stream = text(name)
            mine = []
            for eid, fields in await self._r.xrange(name):
                if b"record" not in fields:
                    continue
                try:
                    owner = json.loads(record_json(stream, fields, self._seal)).get("user_id")
                except DecryptError:  # sealed under a key no longer in the keyring: nobody can read it, nor tell whose
                    unreadable += 1
                    continue
                if owner == user_id:
                    mine.append(eid)
            if mine:
                deleted += int(await self._r.xdel(name, *mine))
                await self.compact_stream(stream)
        if unreadable:
            log.warning("records sealed under a retired key were left in place", records=unreadable)
        return deleted

    async def rewrite_aof(self, timeout_s: float = 60.0) -> bool:
        """Have the server rewrite its append-only file from the data as it is now, so the writes just deleted are no
        longer on its disk; True once it is done (False: no append-only file, or not done within `timeout_s`). A
        rewrite already under way started before the deletes: it is waited out, then another one is asked for."""
        import asyncio

        if not int((await self._r.info("persistence")).get("aof_enabled", 0)):
            return False
        deadline = time.monotonic() + timeout_s

        async def busy() -> bool:
            info = await self._r.info("persistence")
            return bool(int(info.get("aof_rewrite_in_progress", 0)) or int(info.get("aof_rewrite_scheduled", 0)))

        started = False
        while time.monotonic() < deadline:
            if not started:
                if await busy():
                    await asyncio.sleep(0.1)
                    continue
                try:
                    await self._r.bgrewriteaof()
                    started = True
                except ResponseError as exc:  # another one started in between: wait it out, then ask again
                    if "progress" not in str(exc):
                        raise
                continue
            if not await busy():
                return True
            await asyncio.sleep(0.1)
        return False
