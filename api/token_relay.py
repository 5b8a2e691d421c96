"""Relay a turn's tokens from its stream in the store while the turn runs in Temporal."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import structlog

from store.errors import StoreError
from store.token_streams import TokenStreams

log = structlog.get_logger(__name__)

POLL_BLOCK_MS = 100
"""A read waits this long for tokens before checking whether the turn already ended."""


async def relay_tokens(streams: TokenStreams, turn_id: str, turn: asyncio.Future) -> AsyncIterator[str]:
    """Text deltas in order, across generation attempts, until the final chunk.

    If the turn fails before its final chunk, its exception is raised here. If the store fails a read (down, or
    gone while it restarts), relaying stops there: this waits for the turn instead and ends (or raises the turn's
    error), and the caller sends the rest of the answer from the turn's result, which does not need the store.
    """
    last = "0-0"
    while True:
        ended = turn.done()
        try:
            batch = await streams.follow(turn_id, last, block_ms=None if ended else POLL_BLOCK_MS)
        except StoreError as exc:
            with contextlib.suppress(Exception):  # a log line that cannot be written must not end the answer
                log.warning(
                    "cannot read the turn's token stream; the rest of the answer comes with the turn's result",
                    turn_id=turn_id,
                    error=f"{type(exc).__name__}: {exc}",
                )
            await asyncio.wait([turn])  # never cancels the turn, even if this relay is closed meanwhile
            turn.result()  # raises the turn's error, if any
            return
        for entry_id, chunk in batch:
            last = entry_id
            if chunk.text:
                yield chunk.text
            if chunk.finish is not None:
                return
        if ended and not batch:
            turn.result()  # raises the turn's error, if any
            return
