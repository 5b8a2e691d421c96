"""A turn's token stream in Redis: the API relays it to a streaming client, and a retried attempt resumes from it.

One attempt owns the stream at a time (fencing): a stale attempt that lost its
lease (heartbeat timeout) but is still running must not interleave tokens, so
every append checks the owner in the same Lua step. What earlier attempts
published is the checkpoint a new attempt continues from, so the client never
sees a token taken back.
"""

from __future__ import annotations

import json
import time

import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from openclaw_rl import redis_keys
from policy_client.chat import ChatRenderer
from policy_client.detok import IncrementalDetokenizer

STREAM_TTL_S = 24 * 3600
"""Token streams are only a relay and a resume checkpoint; the turn's data outlives them."""

_PUBLISH = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[1], '*', 'a', ARGV[1], 'ids', ARGV[2], 'lps', ARGV[3], 'text', ARGV[4], 'done', ARGV[5])
return 1
"""


class StreamCheckpoint(BaseModel):
    ids: list[int] = Field(default_factory=list)
    lps: list[float] = Field(default_factory=list)
    text: str = ""
    finish: str | None = None
    """Set when an earlier attempt published the whole answer and died before returning it."""


class TokenStreams:
    """Opens the stream of one turn for one attempt; holds the Redis client and the registered script."""

    def __init__(self, redis: aioredis.Redis, flush_s: float):
        self.redis = redis
        self.flush_s = flush_s
        self._publish = redis.register_script(_PUBLISH)

    async def open(self, turn_id: str, attempt: int, renderer: ChatRenderer) -> TokenStream:
        stream = TokenStream(self, turn_id, attempt, renderer)
        await self.redis.set(redis_keys.stream_owner(turn_id), str(attempt), ex=STREAM_TTL_S)
        await stream.load_checkpoint()
        return stream


class TokenStream:
    def __init__(self, streams: TokenStreams, turn_id: str, attempt: int, renderer: ChatRenderer):
        self._s = streams
        self.turn_id = turn_id
        self.attempt = attempt
        self.renderer = renderer
        self.done = StreamCheckpoint()
        self._published = 0
        self._detok = IncrementalDetokenizer(renderer.tokenizer, skip_special_tokens=True)
        self._last_flush = time.monotonic()

    async def load_checkpoint(self) -> None:
        """Tokens published by earlier attempts; a finished stream is never resumed twice."""
        cp = StreamCheckpoint()
        for _, fields in await self._s.redis.xrange(redis_keys.token_stream(self.turn_id)):
            cp.ids += json.loads(fields[b"ids"])
            cp.lps += json.loads(fields[b"lps"])
            cp.text += fields[b"text"].decode()
            if fields[b"done"] != b"0":
                cp.finish = fields[b"done"].decode()
        self.done, self._published = cp, len(cp.ids)
        self._detok.extend(cp.ids)  # context for the text of the tokens to come (their text was published)

    async def progress(self, new_ids: list[int], new_lps: list[float]) -> None:
        """This attempt's tokens so far; published at most every `flush_s`. Only the tokens not yet published are
        read (and decoded), so a whole answer costs time linear in its length."""
        if (
            time.monotonic() - self._last_flush >= self._s.flush_s
            and len(self.done.ids) + len(new_ids) > self._published
        ):
            await self._publish_upto(new_ids, new_lps, final=None)
            self._last_flush = time.monotonic()

    async def finish(self, new_ids: list[int], new_lps: list[float], finish_reason: str) -> None:
        """The rest of the tokens and the finish reason, then the stream's expiry."""
        if not self.done.finish:
            await self._publish_upto(new_ids, new_lps, final=finish_reason)
        await self._s.redis.expire(redis_keys.token_stream(self.turn_id), STREAM_TTL_S)

    async def _publish_upto(self, new_ids: list[int], new_lps: list[float], *, final: str | None) -> None:
        start = self._published - len(self.done.ids)  # this attempt's first token not yet published
        chunk_ids, chunk_lps = new_ids[start:], new_lps[start:]
        delta = self._detok.extend(chunk_ids)  # a multi-byte character still incomplete waits...
        if final:
            delta += self._detok.flush()  # ...unless the answer ends with it
        if not (chunk_ids or delta or final):
            return
        ok = await self._s._publish(
            keys=[redis_keys.token_stream(self.turn_id), redis_keys.stream_owner(self.turn_id)],
            args=[str(self.attempt), json.dumps(chunk_ids), json.dumps(chunk_lps), delta, final or "0"],
        )
        if not ok:
            raise ApplicationError(
                f"attempt {self.attempt} of turn {self.turn_id} lost its stream to a newer attempt",
                type=ErrorType.STREAM_TAKEN_OVER,
            )
        self._published += len(chunk_ids)
