"""Relay a turn's tokens from its stream in the store while the turn runs in Temporal."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from store.token_streams import TokenStreams

POLL_BLOCK_MS = 100
"""A read waits this long for tokens before checking whether the turn already ended."""


async def relay_tokens(streams: TokenStreams, turn_id: str, turn: asyncio.Future) -> AsyncIterator[str]:
    """Text deltas in order, across generation attempts, until the final chunk.

    If the turn fails before its final chunk, its exception is raised here.
    """
    last = "0-0"
    while True:
        ended = turn.done()
        batch = await streams.follow(turn_id, last, block_ms=None if ended else POLL_BLOCK_MS)
        for entry_id, chunk in batch:
            last = entry_id
            if chunk.text:
                yield chunk.text
            if chunk.finish is not None:
                return
        if ended and not batch:
            turn.result()  # raises the turn's error, if any
            return
