"""Training samples: one core every trainer needs, a tagged provenance, their stream encoding, the one script that
publishes a sample exactly once, and the trainer's consumer group over the sample streams.

A stream entry is `id`, `core` (JSON of the scalars), `provenance` (JSON), and the arrays packed (int32 / float32).
Entries written before the split (one `meta` field) still decode. With encryption keys an entry is `id` and
`sealed`: every other field in one blob (store/sealing.py), bound to the stream and the sample id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, Literal

import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from redis.exceptions import ResponseError

from contracts.learning import JudgeSummary
from store import keys
from store.codec import pack_floats, pack_ints, text, unpack_floats, unpack_ints
from store.errors import NotReplicated, Records
from store.sealing import Sealer

TRAINER_GROUP = "oc-trainer"
"""The consumer group the training workflow reads every sample stream with."""


# ---- the sample ---------------------------------------------------------------------------------------------
class PersonalTurn(BaseModel):
    """A judged chat turn of a personal agent."""

    kind: Literal["personal_turn"] = "personal_turn"
    method: str
    """binary, opd or combined."""
    user_id: str
    session_id: str
    turn_id: str
    turn_index: int
    use_teacher: bool
    """The advantages include the teacher-minus-rollout term."""
    reason: str
    """Which rule of the method made the sample."""
    judge: JudgeSummary


class EpisodeStep(BaseModel):
    """One step of a finished general-agent episode, standardised within its (group, step) bucket."""

    kind: Literal["episode_step"] = "episode_step"
    episode_id: str
    step: int
    step_id: str
    """The id the step's token data is kept under."""
    task_id: str
    group_id: str
    outcome: float | None
    """The episode's outcome (None in samples written before provenance was typed)."""
    judge: str
    votes: list[int | None] = Field(default_factory=list)
    """The step's PRM votes."""


Provenance = Annotated[PersonalTurn | EpisodeStep, Field(discriminator="kind")]


class SampleCore(BaseModel):
    """What every trainer needs, whatever the sample came from."""

    sample_id: str
    """One per turn or step, ever: the key that makes publishing idempotent."""
    source: str
    """The sample stream (`personal`, or the setting of an episode)."""
    policy_version: str | None
    """The version that generated the response (staleness is counted from it)."""
    temperature: float
    """Rollout log-probs are log_softmax(logits / T) at this T (rlmath.logprobs)."""
    reward: float
    loss_mask: int
    """1: learn from every response token; 0: submitted but never learned from."""
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]
    advantages: list[float]
    """Per response token: w_binary * r + w_opd * (teacher - rollout), or a step's standardised advantage."""
    teacher_logprobs: list[float] | None = None


class TrainingSample(SampleCore):
    provenance: Provenance

    def token_mask(self) -> list[int]:
        return [self.loss_mask] * len(self.response_ids)


_ARRAYS = ("prompt_ids", "response_ids", "rollout_logprobs", "advantages")
_SCALARS = ("sample_id", "source", "policy_version", "temperature", "reward", "loss_mask")


def encode_sample(s: TrainingSample) -> dict[str, bytes | str]:
    return {
        "id": s.sample_id,
        "core": json.dumps({k: getattr(s, k) for k in _SCALARS}),
        "provenance": s.provenance.model_dump_json(),
        "prompt_ids": pack_ints(s.prompt_ids),
        "response_ids": pack_ints(s.response_ids),
        "rollout_logprobs": pack_floats(s.rollout_logprobs),
        "advantages": pack_floats(s.advantages),
        "teacher_logprobs": pack_floats(s.teacher_logprobs) if s.teacher_logprobs is not None else b"",
    }


SEALED = "sealed"
"""The field of a sealed entry that holds all the others."""


def entry_context(stream_key: str, entry_name: str) -> str:
    """What a sealed stream entry is bound to: its stream and the id it carries (the entry id is Redis's, unknown
    when the value is sealed)."""
    return f"{stream_key}:{entry_name}"


def seal_sample(fields: dict[str, bytes | str], stream_key: str, sealer: Sealer) -> dict[str, bytes | str]:
    """The entry as written: as it is without keys; else `id` and one blob of the rest, sealed once (a sample's
    arrays can be large: one AES-GCM pass, no per-field crypto)."""
    if not sealer.enabled:
        return fields
    sample_id = str(fields["id"])
    rest = {k: v for k, v in fields.items() if k != "id"}
    return {"id": sample_id, SEALED: sealer.seal_fields(entry_context(stream_key, sample_id), rest)}


def decode_sample(fields: dict[bytes, bytes], sealer: Sealer | None = None, stream_key: str = "") -> TrainingSample:
    """An entry as read back; a sealed one needs the store's sealer and the stream it was read from."""
    if SEALED.encode() in fields:
        context = entry_context(stream_key, text(fields[b"id"]))
        fields = {b"id": fields[b"id"], **(sealer or Sealer()).open_fields(context, fields[SEALED.encode()])}
    teacher = fields.get(b"teacher_logprobs", b"")
    if b"core" in fields:
        scalars, provenance = json.loads(fields[b"core"]), json.loads(fields[b"provenance"])
    else:
        scalars, provenance = _from_meta(json.loads(fields[b"meta"]))
    return TrainingSample(
        **scalars,
        provenance=provenance,
        prompt_ids=unpack_ints(fields[b"prompt_ids"]),
        response_ids=unpack_ints(fields[b"response_ids"]),
        rollout_logprobs=unpack_floats(fields[b"rollout_logprobs"]),
        advantages=unpack_floats(fields[b"advantages"]),
        teacher_logprobs=unpack_floats(teacher) if teacher else None,
    )


def _from_meta(meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An entry written before the core/provenance split: one `meta` holding both (a step's in personal fields)."""
    scalars = {k: meta[k] for k in _SCALARS}
    if meta.get("method") == "stepwise":
        episode_id, step = meta["session_id"], meta["turn_index"]
        provenance = EpisodeStep(
            episode_id=episode_id,
            step=step,
            step_id=meta["turn_id"],
            task_id="",
            group_id="",
            outcome=None,
            judge=meta["judge"]["judge"],
            votes=meta["judge"].get("prm_votes", []),
        )
    else:
        provenance = PersonalTurn.model_validate(meta)
    return scalars, provenance.model_dump()


# ---- publishing once ----------------------------------------------------------------------------------------
class AlsoWrite(BaseModel):
    """A write that lands with the sample, in the same atomic step, and only the first time."""

    op: Literal["record", "set", "hset"]
    """record: an entry `id`, `record` on a stream that then expires with the data; set: a value with the data TTL;
    hset: one field of a hash that then expires with the data."""
    key: str
    value: str
    field: str = ""
    """hset only."""
    sealed: bool = False
    """User content (a judgement): sealed when the store has encryption keys, bound to `context`."""

    def context(self, sample_id: str) -> str:
        """What the sealed value is bound to: its key (and its field, or the sample id its record entry carries)."""
        if self.op == "record":
            return entry_context(self.key, sample_id)
        return f"{self.key}:{self.field}" if self.op == "hset" else self.key


# Everything a publication writes, at once and only once: a retried activity or a replayed workflow finds the
# marker and writes nothing. KEYS: the marker, the sample stream, a guard (a forgotten user's tombstone: while it
# exists nothing is written; the marker itself when there is none), then one key per extra write.
# ARGV: sample id, TTL, the number of sample fields (0: a drop, no entry), the fields, then op/field/value per write.
# A repeat still writes once (the marker's TTL, set again): a WAIT after it then waits for the replicas to hold
# everything up to the marker, which a retry after too few acknowledgements needs (a WAIT after no write returns
# at once, covering nothing).
_ATTEMPT = "@attempt"
"""The field of a claim's drop memory holding the newest attempt (stream entries are `source\tentry id`)."""
# KEYS[1]: the claim's drop memory; ARGV: attempt, TTL. The newest attempt fences out older ones.
_FENCE_CLAIM = """
local newest = tonumber(redis.call('HGET', KEYS[1], '@attempt') or '0')
if tonumber(ARGV[1]) > newest then redis.call('HSET', KEYS[1], '@attempt', ARGV[1]) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return redis.call('HGETALL', KEYS[1])
"""
# KEYS[1]: the claim's drop memory; ARGV: attempt, TTL, group hash, entries. Nothing from a fenced-out attempt.
_NOTE_CLAIM_DROPS = """
local newest = tonumber(redis.call('HGET', KEYS[1], '@attempt') or '0')
if tonumber(ARGV[1]) < newest then return 0 end
for i = 4, #ARGV do redis.call('HSET', KEYS[1], ARGV[i], ARGV[3]) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
_PUBLISH_ONCE = """
if KEYS[3] ~= KEYS[1] and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) == false then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 0
end
local n = tonumber(ARGV[3])
local i = 4
if n > 0 then
  local entry = {}
  for j = 0, 2 * n - 1 do entry[#entry + 1] = ARGV[i + j] end
  redis.call('XADD', KEYS[2], '*', unpack(entry))
  i = i + 2 * n
end
for k = 4, #KEYS do
  local op, field, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  if op == 'record' then
    redis.call('XADD', KEYS[k], '*', 'id', ARGV[1], 'record', value)
    redis.call('EXPIRE', KEYS[k], ARGV[2])
  elseif op == 'set' then
    redis.call('SET', KEYS[k], value, 'EX', ARGV[2])
  elseif op == 'hset' then
    redis.call('HSET', KEYS[k], field, value)
    redis.call('EXPIRE', KEYS[k], ARGV[2])
  end
end
return 1
"""


class ReplicaAcks(BaseModel, frozen=True):
    """How many replicas must hold a published sample before `publish_once` returns (`redis.min_replicas_acked`)."""

    replicas: int = Field(0, ge=0)
    """0: none waited for (replication, if any, is asynchronous: a failover can lose the last acknowledged samples)."""
    timeout_ms: int = Field(1000, ge=1)
    """How long to wait for them; fewer in time raises NotReplicated (retryable)."""


class SampleStreams(Records):
    """`oc:samples:<source>` streams, their publication markers, and the trainer's consumer group over them."""

    def __init__(
        self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None, acks: ReplicaAcks | None = None
    ):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()
        self._acks = acks or ReplicaAcks()
        self._publish = redis.register_script(_PUBLISH_ONCE)
        self._fence = redis.register_script(_FENCE_CLAIM)
        self._note = redis.register_script(_NOTE_CLAIM_DROPS)

    # ---- writing ----
    async def was_published(self, sample_id: str) -> bool:
        """Whether `publish_once` wrote `sample_id` (or its drop) already."""
        return bool(await self._r.exists(keys.sample_published(sample_id)))

    async def publish_once(
        self,
        sample_id: str,
        source: str,
        sample: TrainingSample | None,
        also: list[AlsoWrite] = (),
        guard: str | None = None,
    ) -> bool:
        """The sample (None: a drop, nothing to train on) and `also`, atomically, unless `sample_id` was published
        before or the key `guard` exists (a forgotten user's tombstone); True when this call wrote them. With
        `ReplicaAcks.replicas` set, raises NotReplicated unless that many replicas hold it (a retry is safe)."""
        stream_key = keys.sample_stream(source)
        fields = list(seal_sample(encode_sample(sample), stream_key, self._seal).items()) if sample is not None else []
        args: list[Any] = [sample_id, self._ttl_s, len(fields)]
        for name, value in fields:
            args += [name, value]
        for w in also:
            args += [w.op, w.field, self._seal.seal(w.context(sample_id), w.value) if w.sealed else w.value]
        script_keys = [
            keys.sample_published(sample_id),
            stream_key,
            guard or keys.sample_published(sample_id),
            *(w.key for w in also),
        ]
        if self._acks.replicas == 0:
            return bool(await self._publish(keys=script_keys, args=args))
        # WAIT counts the replicas holding this connection's writes: it must follow the script on the same
        # connection, which one pipeline guarantees (a dropped connection re-sends both, and the script is idempotent).
        async with self._r.pipeline(transaction=False) as pipe:
            await self._publish(keys=script_keys, args=args, client=pipe)
            pipe.execute_command("WAIT", self._acks.replicas, self._acks.timeout_ms)
            wrote, acked = await pipe.execute()
        if int(acked) < self._acks.replicas:
            raise NotReplicated(
                f"sample {sample_id}: {acked} of the {self._acks.replicas} replicas redis.min_replicas_acked asks for "
                f"acknowledged it within {self._acks.timeout_ms} ms (none reachable, or lagging); retry",
                acked=int(acked),
                wanted=self._acks.replicas,
            )
        return bool(wrote)

    # ---- the trainer's consumer group ----
    async def ensure_group(self, sources: list[str]) -> None:
        for src in sources:
            try:
                await self._r.xgroup_create(keys.sample_stream(src), TRAINER_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

    async def read_pending(self, consumer: str, source: str, count: int) -> list[str]:
        """Entry ids delivered to `consumer` before and never acknowledged (a claim or step that died)."""
        got = await self._r.xreadgroup(TRAINER_GROUP, consumer, {keys.sample_stream(source): "0"}, count=count)
        return [text(eid) for _, entries in got or [] for eid, _ in entries]

    async def read_new(self, consumer: str, source: str, count: int) -> list[str]:
        """Up to `count` entry ids never delivered to the group, without blocking."""
        if count <= 0:
            return []
        got = await self._r.xreadgroup(TRAINER_GROUP, consumer, {keys.sample_stream(source): ">"}, count=count)
        return [text(eid) for _, entries in got or [] for eid, _ in entries]

    async def wait_for_new(self, sources: list[str], timeout_s: float) -> None:
        """Until an entry the group has not been given yet exists in one of the streams, or `timeout_s` passes.

        A plain XREAD from the group's last delivered id: it consumes nothing, and returns at once if such entries
        are already there (nothing slips between a read and this wait)."""
        since = {}
        for src in sources:
            key = keys.sample_stream(src)
            for group in await self._r.xinfo_groups(key):
                if group["name"] == TRAINER_GROUP.encode():
                    since[key] = group["last-delivered-id"]
        if since:
            await self._r.xread(since, count=1, block=max(1, int(timeout_s * 1000)))
        else:
            await asyncio.sleep(timeout_s)

    async def backlog(self, sources: list[str]) -> int:
        """Entries not yet delivered to the group, over the streams."""
        total = 0
        for src in sources:
            for group in await self._r.xinfo_groups(keys.sample_stream(src)):
                if group["name"] == TRAINER_GROUP.encode() and group.get("lag") is not None:
                    total += int(group["lag"])
        return total

    async def load(self, source: str, entry_id: str) -> TrainingSample | None:
        """One entry by id; None when it is gone."""
        key = keys.sample_stream(source)
        entries = await self._r.xrange(key, entry_id, entry_id)
        return decode_sample(entries[0][1], self._seal, key) if entries else None

    async def fence_claim(self, claim: str, attempt: int, ttl_s: int) -> dict[tuple[str, str], str]:
        """Attempt `attempt` of training claim `claim` takes over from earlier ones (which can note nothing more), and
        gets what they noted: (source, entry id) -> the hash of the drop group it was named under."""
        raw = await self._fence(keys=[keys.claim_drops(claim)], args=[attempt, ttl_s])
        pairs = dict(zip(raw[::2], raw[1::2]))
        return {tuple(text(k).split("\t", 1)): text(v) for k, v in pairs.items() if text(k) != _ATTEMPT}  # type: ignore[misc]

    async def note_claim_drops(
        self, claim: str, attempt: int, group: str, entries: set[tuple[str, str]], ttl_s: int
    ) -> bool:
        """Note the stale entries attempt `attempt` of claim `claim` dropped, under their group's hash, before they are
        named on disk and acknowledged; False (nothing noted) when a newer attempt has taken over."""
        args = [attempt, ttl_s, group, *(f"{src}\t{eid}" for src, eid in entries)]
        return bool(await self._note(keys=[keys.claim_drops(claim)], args=args))

    async def acknowledge(self, source: str, entry_ids: list[str]) -> int:
        """Acknowledge, then delete (the record streams and the JSONL files keep what was judged); returns how many
        were still pending."""
        if not entry_ids:
            return 0
        key = keys.sample_stream(source)
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.xack(key, TRAINER_GROUP, *entry_ids)
            pipe.xdel(key, *entry_ids)
            pipe.srem(keys.forgotten_entries(source), *entry_ids)
            acked, _, _ = await pipe.execute()
        return int(acked)

    # ---- forgetting a user (control.user_data) ----
    async def sources(self) -> list[str]:
        """Every sample stream there is."""
        prefix = keys.sample_stream("")
        names = [text(k) async for k in self._r.scan_iter(match=keys.sample_stream("*"), _type="stream")]
        return sorted(n[len(prefix) :] for n in names)

    async def forget(self, source: str, entry_ids: list[str]) -> tuple[int, int]:
        """Delete entries of a forgotten user. Those the trainer has claimed (pending) are noted, so the step that
        claimed them skips them instead of failing on a missing sample (`was_forgotten`); returns how many went, and
        how many of those were claimed."""
        if not entry_ids:
            return 0, 0
        key = keys.sample_stream(source)
        pending: set[str] = set()
        try:
            for p in await self._r.xpending_range(key, TRAINER_GROUP, min="-", max="+", count=100_000):
                pending.add(text(p["message_id"]))
        except ResponseError as exc:  # no consumer group yet: nothing is claimed
            if "NOGROUP" not in str(exc):
                raise
        claimed = [e for e in entry_ids if e in pending]
        async with self._r.pipeline(transaction=True) as pipe:
            if claimed:
                pipe.sadd(keys.forgotten_entries(source), *claimed)
            pipe.xdel(key, *entry_ids)
            *_, deleted = await pipe.execute()
        return int(deleted), len(claimed)

    async def was_forgotten(self, source: str, entry_id: str) -> bool:
        """The entry was deleted by a forget while claimed (the train step skips it)."""
        return bool(await self._r.sismember(keys.forgotten_entries(source), entry_id))

    async def entries(self, source: str, count: int | None = None) -> list[tuple[str, TrainingSample]]:
        """The stream's entries in order (tests, benchmarks, audits): (entry id, sample)."""
        key = keys.sample_stream(source)
        got = await self._r.xrange(key, count=count)
        return [(text(eid), decode_sample(fields, self._seal, key)) for eid, fields in got]

    async def length(self, source: str) -> int:
        return int(await self._r.xlen(keys.sample_stream(source)))
