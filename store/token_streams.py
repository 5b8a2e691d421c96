"""Each turn's token stream (`oc:stream:<turn id>`): the API relays it to a streaming client, and a retried
generation attempt resumes from it.

One attempt owns the stream at a time (`oc:stream:<turn id>:owner`): a stale attempt that lost its lease but is
still running must not interleave tokens, so every append checks the owner in the same Lua step.
"""

from __future__ import annotations

import json

import redis.asyncio as aioredis
from pydantic import BaseModel, Field

from store import keys
from store.codec import text
from store.errors import Records


class StreamChunk(BaseModel):
    """One entry: the tokens an attempt published at once, their log-probs and text."""

    attempt: int
    ids: list[int] = Field(default_factory=list)
    lps: list[float] = Field(default_factory=list)
    text: str = ""
    """The text of these tokens (a multi-byte character still incomplete waits for the next chunk)."""
    finish: str | None = None
    """The finish reason on the last chunk of the answer."""


_APPEND = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], '*', 'a', ARGV[1], 'ids', ARGV[2], 'lps', ARGV[3], 'text', ARGV[4], 'done', ARGV[5])
return 1
"""


def _chunk(fields: dict[bytes, bytes]) -> StreamChunk:
    done = text(fields[b"done"])
    return StreamChunk(
        attempt=int(fields.get(b"a", b"0")),
        ids=json.loads(fields[b"ids"]),
        lps=json.loads(fields[b"lps"]),
        text=text(fields[b"text"]),
        finish=None if done == "0" else done,
    )


class TokenStreams(Records):
    def __init__(self, redis: aioredis.Redis):
        self._r = redis
        self._append = redis.register_script(_APPEND)

    async def take_over(self, turn_id: str, attempt: int) -> None:
        """`attempt` owns the stream from now on; earlier attempts' appends are refused."""
        await self._r.set(keys.stream_owner(turn_id), str(attempt), ex=keys.STREAM_TTL_S)

    async def chunks(self, turn_id: str) -> list[StreamChunk]:
        """Everything published so far, in order."""
        return [_chunk(fields) for _, fields in await self._r.xrange(keys.token_stream(turn_id))]

    async def append(self, turn_id: str, chunk: StreamChunk) -> bool:
        """Publish `chunk` if its attempt still owns the stream; False when a newer attempt took it over."""
        ok = await self._append(
            keys=[keys.token_stream(turn_id), keys.stream_owner(turn_id)],
            args=[str(chunk.attempt), json.dumps(chunk.ids), json.dumps(chunk.lps), chunk.text, chunk.finish or "0"],
        )
        return bool(ok)

    async def close(self, turn_id: str) -> None:
        """The answer is complete: the stream expires (it is only a relay and a checkpoint)."""
        await self._r.expire(keys.token_stream(turn_id), keys.STREAM_TTL_S)

    async def follow(self, turn_id: str, after: str, block_ms: int | None) -> list[tuple[str, StreamChunk]]:
        """Entries after entry id `after` ("0-0": from the start), waiting up to `block_ms` for the first (None:
        no wait); (entry id, chunk) in order."""
        got = await self._r.xread({keys.token_stream(turn_id): after}, block=block_ms, count=256)
        return [(text(eid), _chunk(fields)) for _, entries in got or [] for eid, fields in entries]
