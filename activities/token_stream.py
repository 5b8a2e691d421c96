"""A turn's token stream: the API relays it to a streaming client, and a retried attempt resumes from it.

One attempt owns the stream at a time (store.token_streams fences a stale attempt
off). What earlier attempts published is the checkpoint a new attempt continues
from, so the client never sees a token taken back.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from policy_client.chat import ChatRenderer
from policy_client.detok import IncrementalDetokenizer
from store.token_streams import StreamChunk, TokenStreams


class StreamCheckpoint(BaseModel):
    ids: list[int] = Field(default_factory=list)
    lps: list[float] = Field(default_factory=list)
    text: str = ""
    finish: str | None = None
    """Set when an earlier attempt published the whole answer and died before returning it."""


class TurnStreams:
    """Opens the stream of one turn for one attempt."""

    def __init__(self, streams: TokenStreams, flush_s: float):
        self.streams = streams
        self.flush_s = flush_s

    async def open(self, turn_id: str, attempt: int, renderer: ChatRenderer) -> TokenStream:
        stream = TokenStream(self, turn_id, attempt, renderer)
        await self.streams.take_over(turn_id, attempt)
        await stream.load_checkpoint()
        return stream


class TokenStream:
    def __init__(self, owner: TurnStreams, turn_id: str, attempt: int, renderer: ChatRenderer):
        self._s = owner
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
        for chunk in await self._s.streams.chunks(self.turn_id):
            cp.ids += chunk.ids
            cp.lps += chunk.lps
            cp.text += chunk.text
            if chunk.finish is not None:
                cp.finish = chunk.finish
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
        await self._s.streams.close(self.turn_id)

    async def _publish_upto(self, new_ids: list[int], new_lps: list[float], *, final: str | None) -> None:
        start = self._published - len(self.done.ids)  # this attempt's first token not yet published
        chunk_ids, chunk_lps = new_ids[start:], new_lps[start:]
        delta = self._detok.extend(chunk_ids)  # a multi-byte character still incomplete waits...
        if final:
            delta += self._detok.flush()  # ...unless the answer ends with it
        if not (chunk_ids or delta or final):
            return
        chunk = StreamChunk(attempt=self.attempt, ids=chunk_ids, lps=chunk_lps, text=delta, finish=final)
        if not await self._s.streams.append(self.turn_id, chunk):
            raise ApplicationError(
                f"attempt {self.attempt} of turn {self.turn_id} lost its stream to a newer attempt",
                type=ErrorType.STREAM_TAKEN_OVER,
            )
        self._published += len(chunk_ids)
