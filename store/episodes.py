"""An episode attempt's data (under `oc:ep:<episode id>:a<attempt>`): its opening (`:open`) and one hash of its
steps (`:steps`, `a:<t>` each action, `o:<t>` each observation), so a step reads the whole history, or the steps a
vote needs, in one round trip whatever its index. Also a finished episode's published step advantages
(`oc:ep:<episode id>:adv`, written with its samples). With encryption keys the opening and each step's action and
observation (messages, screenshots) are sealed, each bound to its key (and field); the advantages are numbers."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel

from envs.base import Action, Observation
from store import keys
from store.codec import text
from store.errors import Records
from store.samples import AlsoWrite
from store.sealing import Sealer


class EpisodeDataMissing(LookupError):
    """A record the episode wrote is gone (expired, or the attempt never got that far)."""


class EpisodeOpening(BaseModel):
    """What env_open wrote: the opening messages (system, user) and the tools."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    setting: str = ""
    """Which setting's history policy applies (activities.episode_data.HISTORY)."""


class StepAction(BaseModel):
    """What agent_step wrote: the assistant message the conversation continues with, and the parsed action."""

    message: dict[str, Any]
    action: Action


class StepObservation(BaseModel):
    """What env_step wrote: the observation, and the messages it adds (tool results, a user turn)."""

    observation: Observation
    messages: list[dict[str, Any]]


class EpisodeStepData(BaseModel):
    index: int
    action: StepAction
    observation: StepObservation


class EpisodeData(Records):
    def __init__(self, redis: aioredis.Redis, ttl_s: int, sealer: Sealer | None = None):
        self._r = redis
        self._ttl_s = ttl_s
        self._seal = sealer or Sealer()

    # ---- writing: one call each ----
    async def open(self, attempt_key: str, opening: EpisodeOpening) -> None:
        key = keys.episode_opening(attempt_key)
        await self._r.set(key, self._seal.seal(key, opening.model_dump_json()), ex=self._ttl_s)

    async def save_action(self, attempt_key: str, step: int, action: StepAction) -> None:
        await self._hset(attempt_key, keys.step_action_field(step), action.model_dump_json())

    async def save_observation(self, attempt_key: str, step: int, observation: StepObservation) -> None:
        await self._hset(attempt_key, keys.step_observation_field(step), observation.model_dump_json())

    async def _hset(self, attempt_key: str, field: str, value: str) -> None:
        key = keys.episode_steps(attempt_key)
        async with self._r.pipeline(transaction=False) as pipe:  # one round trip
            pipe.hset(key, field, self._seal.seal(f"{key}:{field}", value))
            pipe.expire(key, self._ttl_s)
            await pipe.execute()

    # ---- reading: one round trip each, whatever the step ----
    async def action(self, attempt_key: str, step: int) -> StepAction:
        key, field = keys.episode_steps(attempt_key), keys.step_action_field(step)
        raw = self._seal.open(f"{key}:{field}", await self._r.hget(key, field))
        if raw is None:
            raise EpisodeDataMissing(f"step {step} of {attempt_key} has no action")
        return StepAction.model_validate_json(raw)

    async def opening(self, attempt_key: str) -> EpisodeOpening:
        return self._opening(attempt_key, await self._r.get(keys.episode_opening(attempt_key)))

    async def history(self, attempt_key: str, upto: int) -> tuple[EpisodeOpening, list[EpisodeStepData]]:
        """The opening and steps 0..upto-1 (what the policy has seen before step `upto`)."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.get(keys.episode_opening(attempt_key))
            pipe.hgetall(keys.episode_steps(attempt_key))
            opening, fields = await pipe.execute()
        found = self._fields(attempt_key, {text(k): v for k, v in fields.items()})
        return self._opening(attempt_key, opening), [self._step(attempt_key, t, found) for t in range(upto)]

    async def steps(self, attempt_key: str, indexes: list[int]) -> tuple[EpisodeOpening, list[EpisodeStepData]]:
        """The opening and the steps named (a vote's window), in the order given."""
        names = [f(t) for t in indexes for f in (keys.step_action_field, keys.step_observation_field)]
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.get(keys.episode_opening(attempt_key))
            pipe.hmget(keys.episode_steps(attempt_key), names)
            opening, values = await pipe.execute()
        found = self._fields(attempt_key, {n: v for n, v in zip(names, values) if v is not None})
        return self._opening(attempt_key, opening), [self._step(attempt_key, t, found) for t in indexes]

    async def recorded(
        self, attempt_key: str
    ) -> tuple[EpisodeOpening | None, dict[int, tuple[StepAction | None, StepObservation | None]]]:
        """Whatever is still kept of the attempt, opened: its opening and, per step index, its action and
        observation (None where gone). A user's export reads it (control.user_data)."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.get(keys.episode_opening(attempt_key))
            pipe.hgetall(keys.episode_steps(attempt_key))
            raw_opening, fields = await pipe.execute()
        opening = None if raw_opening is None else self._opening(attempt_key, raw_opening)
        steps: dict[int, tuple[StepAction | None, StepObservation | None]] = {}
        for name, raw in self._fields(attempt_key, {text(k): v for k, v in fields.items()}).items():
            kind, _, index = name.partition(":")
            if raw is None or not index.isdigit():
                continue
            act, obs = steps.get(int(index), (None, None))
            if kind == "a":
                act = StepAction.model_validate_json(raw)
            elif kind == "o":
                obs = StepObservation.model_validate_json(raw)
            steps[int(index)] = (act, obs)
        return opening, dict(sorted(steps.items()))

    async def observations(self, attempt_key: str, indexes: list[int]) -> dict[int, Observation]:
        """The observations still kept of the steps named (`episodes show` reads their screenshots)."""
        if not indexes:
            return {}
        key, names = keys.episode_steps(attempt_key), [keys.step_observation_field(t) for t in indexes]
        values = [self._seal.open(f"{key}:{n}", v) for n, v in zip(names, await self._r.hmget(key, names))]
        return {t: StepObservation.model_validate_json(v).observation for t, v in zip(indexes, values) if v}

    async def advantages(self, episode_id: str) -> dict[int, tuple[float, float]]:
        """Step -> (reward, advantage) of a finished episode's published steps."""
        raw = await self._r.hgetall(keys.episode_advantages(episode_id))
        out = {}
        for k, v in raw.items():
            reward, advantage = text(v).split()
            out[int(k)] = (float(reward), float(advantage))
        return out

    def _fields(self, attempt_key: str, found: dict[str, bytes | None]) -> dict[str, bytes | None]:
        """Step fields as read, opened where sealed."""
        key = keys.episode_steps(attempt_key)
        return {name: self._seal.open(f"{key}:{name}", raw) for name, raw in found.items()}

    def _opening(self, attempt_key: str, raw: bytes | None) -> EpisodeOpening:
        if raw is None:
            raise EpisodeDataMissing(f"the opening of {attempt_key} is gone from the store")
        return EpisodeOpening.model_validate_json(self._seal.open(keys.episode_opening(attempt_key), raw))

    @staticmethod
    def _step(attempt_key: str, t: int, found: dict[str, bytes]) -> EpisodeStepData:
        act, obs = found.get(keys.step_action_field(t)), found.get(keys.step_observation_field(t))
        if act is None or obs is None:
            raise EpisodeDataMissing(f"step {t} of {attempt_key} is gone from the store")
        return EpisodeStepData(
            index=t, action=StepAction.model_validate_json(act), observation=StepObservation.model_validate_json(obs)
        )


def advantage_write(episode_id: str, step: int, reward: float, advantage: float) -> AlsoWrite:
    """The `episodes show` entry that lands with a step's sample, in the same publication."""
    return AlsoWrite(op="hset", key=keys.episode_advantages(episode_id), field=str(step), value=f"{reward} {advantage}")
