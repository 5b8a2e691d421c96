"""Each turn's token stream (`oc:stream:<turn id>`): the API relays it to a streaming client, and a retried
generation attempt resumes from it.

One attempt owns the stream at a time (`oc:stream:<turn id>:owner`): a stale attempt that lost its lease but is
still running must not interleave tokens, so every append checks the owner in the same Lua step.

With encryption keys an entry keeps its attempt and finish reason (`a`, `done`) and seals the rest (ids, log-probs,
text) into `sealed`, bound to the stream and the attempt (store/sealing.py); entries in the clear still read.
"""

from __future__ import annotations

import json

import redis.asyncio as aioredis
from pydantic import BaseModel, Field

from store import keys
from store.codec import text
from store.errors import Records
from store.sealing import Sealer


class StreamChunk(BaseModel):
    """One entry: the tokens an attempt published at once, their log-probs and text."""

    attempt: int
    ids: list[int] = Field(default_factory=list)
    lps: list[float] = Field(default_factory=list)
    text: str = ""
    """The text of these tokens (a multi-byte character still incomplete waits for the next chunk)."""
    finish: str | None = None
    """The finish reason on the last chunk of the answer."""


# ARGV: the attempt, then the entry's fields and values (the clear and the sealed entries differ in fields).
_APPEND = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
return 1
"""


def _context(key: str, attempt: int | str) -> str:
    return f"{key}:{attempt}"


def _entry(key: str, chunk: StreamChunk, sealer: Sealer) -> list[str | bytes]:
    a, done = str(chunk.attempt), chunk.finish or "0"
    ids, lps = json.dumps(chunk.ids), json.dumps(chunk.lps)
    if not sealer.enabled:
        return ["a", a, "ids", ids, "lps", lps, "text", chunk.text, "done", done]
    sealed = sealer.seal_fields(_context(key, a), {"ids": ids, "lps": lps, "text": chunk.text})
    return ["a", a, "sealed", sealed, "done", done]


def _chunk(key: str, fields: dict[bytes, bytes], sealer: Sealer) -> StreamChunk:
    done = text(fields[b"done"])
    attempt = int(fields.get(b"a", b"0"))
    if b"sealed" in fields:
        fields = sealer.open_fields(_context(key, attempt), fields[b"sealed"])
    return StreamChunk(
        attempt=attempt,
        ids=json.loads(fields[b"ids"]),
        lps=json.loads(fields[b"lps"]),
        text=text(fields[b"text"]),
        finish=None if done == "0" else done,
    )


class TokenStreams(Records):
    def __init__(self, redis: aioredis.Redis, sealer: Sealer | None = None):
        self._r = redis
        self._seal = sealer or Sealer()
        self._append = redis.register_script(_APPEND)

    async def take_over(self, turn_id: str, attempt: int) -> None:
        """`attempt` owns the stream from now on; earlier attempts' appends are refused."""
        await self._r.set(keys.stream_owner(turn_id), str(attempt), ex=keys.STREAM_TTL_S)

    async def chunks(self, turn_id: str) -> list[StreamChunk]:
        """Everything published so far, in order."""
        key = keys.token_stream(turn_id)
        return [_chunk(key, fields, self._seal) for _, fields in await self._r.xrange(key)]

    async def append(self, turn_id: str, chunk: StreamChunk) -> bool:
        """Publish `chunk` if its attempt still owns the stream; False when a newer attempt took it over."""
        key = keys.token_stream(turn_id)
        ok = await self._append(
            keys=[key, keys.stream_owner(turn_id)], args=[str(chunk.attempt), *_entry(key, chunk, self._seal)]
        )
        return bool(ok)

    async def close(self, turn_id: str) -> None:
        """The answer is complete: the stream expires (it is only a relay and a checkpoint)."""
        await self._r.expire(keys.token_stream(turn_id), keys.STREAM_TTL_S)

    async def follow(self, turn_id: str, after: str, block_ms: int | None) -> list[tuple[str, StreamChunk]]:
        """Entries after entry id `after` ("0-0": from the start), waiting up to `block_ms` for the first (None:
        no wait); (entry id, chunk) in order."""
        key = keys.token_stream(turn_id)
        got = await self._r.xread({key: after}, block=block_ms, count=256)
        return [(text(eid), _chunk(key, fields, self._seal)) for _, entries in got or [] for eid, fields in entries]
