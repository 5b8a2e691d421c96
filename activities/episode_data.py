"""Reading an episode attempt back from Redis: its opening, and each step's action and observation."""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    """The messages the policy sees before step `upto` (opening, then each step's action and observation), and tools.

    A setting with a history policy (`HISTORY`) sees only the steps the policy keeps once the history is long.
    """
    open_ = await opening(redis, attempt_key)
    steps: list[list[dict]] = []
    for t in range(upto):
        step = [(await action(redis, attempt_key, t))["message"]]
        steps.append(step + (await observation(redis, attempt_key, t))["messages"])
    policy = HISTORY.get(open_.get("setting", ""))
    if policy is not None:
        steps = policy.keep(steps)
    return [*open_["messages"], *(m for step in steps for m in step)], open_["tools"]


@dataclass(frozen=True)
class HeadTail:
    """Past `max_chars` of step text, keep the first steps within `head` of it and the last within the rest.

    The reference's SWE history: head 30% + tail 70%. The first steps hold the agent's exploration of the task, the
    last its current work; the middle goes. Whole steps are kept or dropped (an action with its observation), and
    the last step always stays; a user note at the cut tells the policy how many steps it does not see.
    """

    max_chars: int
    head: float = 0.3

    def keep(self, steps: list[list[dict]]) -> list[list[dict]]:
        sizes = [sum(len(str(m.get("content") or "")) for m in step) for step in steps]
        if sum(sizes) <= self.max_chars or len(steps) < 2:
            return steps
        budget_head = self.max_chars * self.head
        n_head, used = 0, 0
        while n_head < len(steps) - 1 and used + sizes[n_head] <= budget_head:
            used, n_head = used + sizes[n_head], n_head + 1
        n_tail, used = 1, sizes[-1]
        budget_tail = self.max_chars - budget_head
        while n_head + n_tail < len(steps) and used + sizes[-n_tail - 1] <= budget_tail:
            used, n_tail = used + sizes[-n_tail - 1], n_tail + 1
        dropped = len(steps) - n_head - n_tail
        if dropped == 0:
            return steps
        steps_word = "steps" if dropped > 1 else "step"
        note = {"role": "user", "content": f"[{dropped} {steps_word} left out here: the history is long]"}
        return [*steps[:n_head], [note], *steps[-n_tail:]]


SWE_HISTORY_CHARS = 60_000
"""About 15k tokens of past steps: with the opening and a reply, within a 32k-token context."""
HISTORY: dict[str, HeadTail] = {"swe": HeadTail(max_chars=SWE_HISTORY_CHARS)}
"""Per-setting history policies; a setting not named here sees every step."""
