"""Token-level data of a finished turn or episode step (written by the rollout core), and teacher log-probs."""

from __future__ import annotations

import redis.asyncio as aioredis
from pydantic import BaseModel

from store import keys
from store.codec import pack_floats, pack_ints, text, unpack_floats, unpack_ints
from store.errors import Records
from store.sealing import Sealer


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


class TurnData(Records):
    """`oc:turn:<id>` (a hash of packed arrays and scalars) and `oc:teacher:<id>` (packed float32).

    With encryption keys the user's content is sealed field by field (each bound to `<key>:<field>`): the prompt's
    and response's token ids (they decode to the conversation) and the response text; log-probs stay as they are."""

    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    async def save(self, data: TurnTokens) -> str:
        key = keys.turn_data(data.turn_id)
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "prompt_ids": self._seal.seal(f"{key}:prompt_ids", pack_ints(data.prompt_ids)),
                    "response_ids": self._seal.seal(f"{key}:response_ids", pack_ints(data.response_ids)),
                    "response_logprobs": pack_floats(data.response_logprobs),
                    "weight_version": data.weight_version or "",
                    "finish_reason": data.finish_reason,
                    "resumed_at": str(data.resumed_at),
                    "response_text": self._seal.seal(f"{key}:response_text", data.response_text),
                    "temperature": str(data.temperature),
                },
            )
            pipe.expire(key, self._ttl_s)
            await pipe.execute()
        return key

    async def load(self, turn_id: str) -> TurnTokens | None:
        key = keys.turn_data(turn_id)
        raw = await self._r.hgetall(key)
        if not raw:
            return None
        f = {text(k): v for k, v in raw.items()}
        for name in ("prompt_ids", "response_ids", "response_text"):
            f[name] = self._seal.open(f"{key}:{name}", f.get(name))
        return TurnTokens(
            turn_id=turn_id,
            prompt_ids=unpack_ints(f["prompt_ids"]),
            response_ids=unpack_ints(f["response_ids"]),
            response_logprobs=unpack_floats(f["response_logprobs"]),
            weight_version=text(f["weight_version"]) or None,
            finish_reason=text(f["finish_reason"]),
            resumed_at=int(f["resumed_at"]),
            response_text=text(f["response_text"]),
            temperature=float(f.get("temperature", b"1.0")),
        )

    async def response_text(self, turn_id: str) -> str | None:
        """The decoded response alone (what a judge reads), without the arrays; None when the turn has no data."""
        key = keys.turn_data(turn_id)
        raw = self._seal.open(f"{key}:response_text", await self._r.hget(key, "response_text"))
        return None if raw is None else text(raw)

    async def save_teacher_logprobs(self, turn_id: str, values: list[float]) -> str:
        key = keys.teacher_logprobs(turn_id)
        await self._r.set(key, pack_floats(values), ex=self._ttl_s)
        return key

    async def teacher_logprobs(self, key: str) -> list[float] | None:
        """By the reference a teacher pass returned (`TeacherResult.key`)."""
        raw = await self._r.get(key)
        return None if raw is None else unpack_floats(raw)
