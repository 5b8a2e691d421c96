"""Relay a turn's tokens from its Redis stream while the turn runs in Temporal."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

import redis.asyncio as aioredis

from openclaw_rl import redis_keys

POLL_BLOCK_MS = 100
"""XREAD blocks this long before checking whether the turn already ended."""


async def relay_tokens(redis: aioredis.Redis, turn_id: str, turn: asyncio.Future) -> AsyncIterator[str]:
    """Text deltas in order, across generation attempts, until the final chunk.

    If the turn fails before its final chunk, its exception is raised here.
    """
    key = redis_keys.token_stream(turn_id)
    last = "0-0"
    while True:
        ended = turn.done()
        batch = await redis.xread({key: last}, block=None if ended else POLL_BLOCK_MS, count=256)
        for _, entries in batch or []:
            for entry_id, fields in entries:
                last = entry_id
                if fields[b"text"]:
                    yield fields[b"text"].decode()
                if fields[b"done"] != b"0":
                    return
        if ended and not batch:
            turn.result()  # raises the turn's error, if any
            return
