"""Reading an episode attempt back from Redis: its opening, and each step's action and observation."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from openclaw_rl import redis_keys


async def _json(redis: aioredis.Redis, key: str) -> Any:
    raw = await redis.get(key)
    if raw is None:
        raise ApplicationError(f"{key} is gone from Redis", type=ErrorType.EPISODE_DATA_MISSING, non_retryable=True)
    return json.loads(raw)


async def opening(redis: aioredis.Redis, attempt_key: str) -> dict[str, Any]:
    """{"messages": [...], "tools": [...]}: what env_open wrote."""
    return await _json(redis, redis_keys.episode_opening(attempt_key))


async def action(redis: aioredis.Redis, attempt_key: str, step: int) -> dict[str, Any]:
    """{"message": assistant message, "action": envs.base.Action dump}: what agent_step wrote."""
    return await _json(redis, redis_keys.episode_action(attempt_key, step))


async def observation(redis: aioredis.Redis, attempt_key: str, step: int) -> dict[str, Any]:
    """{"observation": envs.base.Observation dump, "messages": [...]}: what env_step wrote."""
    return await _json(redis, redis_keys.episode_observation(attempt_key, step))


async def conversation(redis: aioredis.Redis, attempt_key: str, upto: int) -> tuple[list[dict], list[dict]]:
    """The messages the policy sees before step `upto` (opening, then each step's action and observation), and tools."""
    open_ = await opening(redis, attempt_key)
    messages = list(open_["messages"])
    for t in range(upto):
        messages.append((await action(redis, attempt_key, t))["message"])
        messages += (await observation(redis, attempt_key, t))["messages"]
    return messages, open_["tools"]
