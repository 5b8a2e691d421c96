"""Token-level data of a finished turn, stored in Redis by the generate activity.

Ids and log-probs are packed little-endian (int32 / float32): a 12K-token prompt
is 48 KB instead of ~80 KB of JSON, and decodes without parsing.
"""

from __future__ import annotations

from array import array

import redis.asyncio as aioredis
from pydantic import BaseModel

from openclaw_rl import redis_keys


class TurnTokens(BaseModel):
    turn_id: str
    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    """Rollout log-prob of each response token under the serving weights (rlmath.logprobs convention)."""
    weight_version: str | None
    finish_reason: str
    resumed_at: int = 0
    """Response tokens produced by an earlier attempt that died (0: one attempt)."""
    response_text: str = ""
    """The response decoded, tool-call markup included (what the judges read)."""
    temperature: float = 1.0
    """Sampling temperature; rollout log-probs are log_softmax(logits / T) at it."""


def _pack(values: list[int] | list[float], code: str) -> bytes:
    return array(code, values).tobytes()


def _unpack(raw: bytes, code: str) -> list:
    out = array(code)
    out.frombytes(raw)
    return out.tolist()


async def save_turn_tokens(redis: aioredis.Redis, data: TurnTokens, *, ttl_s: int = redis_keys.DATA_TTL_S) -> str:
    key = redis_keys.turn_data(data.turn_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(
            key,
            mapping={
                "prompt_ids": _pack(data.prompt_ids, "i"),
                "response_ids": _pack(data.response_ids, "i"),
                "response_logprobs": _pack(data.response_logprobs, "f"),
                "weight_version": data.weight_version or "",
                "finish_reason": data.finish_reason,
                "resumed_at": str(data.resumed_at),
                "response_text": data.response_text,
                "temperature": str(data.temperature),
            },
        )
        pipe.expire(key, ttl_s)
        await pipe.execute()
    return key


async def load_turn_tokens(redis: aioredis.Redis, turn_id: str) -> TurnTokens | None:
    raw = await redis.hgetall(redis_keys.turn_data(turn_id))
    if not raw:
        return None
    f = {k.decode() if isinstance(k, bytes) else k: v for k, v in raw.items()}
    return TurnTokens(
        turn_id=turn_id,
        prompt_ids=_unpack(f["prompt_ids"], "i"),
        response_ids=_unpack(f["response_ids"], "i"),
        response_logprobs=_unpack(f["response_logprobs"], "f"),
        weight_version=f["weight_version"].decode() or None,
        finish_reason=f["finish_reason"].decode(),
        resumed_at=int(f["resumed_at"]),
        response_text=f.get("response_text", b"").decode(),
        temperature=float(f.get("temperature", b"1.0")),
    )


async def save_floats(
    redis: aioredis.Redis, key: str, values: list[float], *, ttl_s: int = redis_keys.DATA_TTL_S
) -> None:
    await redis.set(key, _pack(values, "f"), ex=ttl_s)


async def load_floats(redis: aioredis.Redis, key: str) -> list[float] | None:
    raw = await redis.get(key)
    return None if raw is None else _unpack(raw, "f")


def pack_ints(values: list[int]) -> bytes:
    return _pack(values, "i")


def pack_floats(values: list[float]) -> bytes:
    return _pack(values, "f")


def unpack_ints(raw: bytes) -> list[int]:
    return _unpack(raw, "i")


def unpack_floats(raw: bytes) -> list[float]:
    return _unpack(raw, "f")
