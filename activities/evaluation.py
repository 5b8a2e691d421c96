"""The evaluation activities (policy pool): which version and sets to evaluate, one set's answers and scores, an
episode set's held-out task ids, and recording scores (store and curves).

Answers come through the same rollout core as chat turns (render with the model's chat template, generate from
the policy servers token-in/token-out), so an evaluated version answers exactly as it serves users; nothing of an
evaluation is kept as a turn or a sample.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.curves import CurveWriter
from activities.eval_curves import EVAL_RUN, eval_points
from activities.heartbeat import heartbeating
from activities.rollout import Rollout
from contracts.chat import ChatSampling
from contracts.errors import ErrorType
from contracts.evaluation import (
    EVAL_EPISODE_TASKS,
    EVAL_PLAN,
    EVALUATE_SET,
    RECORD_SCORES,
    EpisodeTasks,
    EpisodeTasksInput,
    EvalPlan,
    EvaluateSetInput,
    PlanInput,
    RecordResult,
    SetScores,
)
from evals.base import EvalCase, EvalSetError
from evals.episodes import first_held_out
from evals.registry import load_set
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from store.client import Store

log = structlog.get_logger(__name__)


class EvalActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self.policy = PolicyClient.from_settings(settings)
        self._rollout: Rollout | None = None
        # One writer per process: one event file and one W&B run for every evaluation this worker records.
        self.curves = CurveWriter(settings.data_dir, run=EVAL_RUN, wandb=settings.curves.wandb)

    @property
    def rollout(self) -> Rollout:
        # Made on first use: it loads the tokenizer, which a policy worker that never evaluates need not wait for.
        if self._rollout is None:
            self._rollout = Rollout(self.settings, self.store, self.policy)
        return self._rollout

    @activity.defn(name=EVAL_PLAN.name)
    async def eval_plan(self, inp: PlanInput) -> EvalPlan:
        version = inp.version if inp.version is not None else await self.store.policy.served()
        done = await self.store.evals.evaluated(version)
        not_evaluable = None
        if self.settings.training.adapters == "per_user":
            not_evaluable = (
                "training.adapters = per_user: the served base never changes, each user's adapter does "
                "(openclaw-rl bench two-users scores adapters)"
            )
        return EvalPlan(
            version=version,
            sets=[s for s in inp.sets if s not in done],
            last_evaluated=await self.store.evals.last_version(),
            not_evaluable=not_evaluable,
        )

    @activity.defn(name=EVALUATE_SET.name)
    async def evaluate_set(self, inp: EvaluateSetInput) -> SetScores:
        try:
            eval_set = await asyncio.to_thread(load_set, inp.set, self.settings)
        except EvalSetError as exc:
            raise ApplicationError(str(exc), type=ErrorType.EVAL_SET_INVALID, non_retryable=True) from exc
        started = time.monotonic()
        async with heartbeating(10.0):
            answers = await self._answers(eval_set.cases)
        served = {v for _, v in answers if v is not None}
        if served - {str(inp.version)}:
            raise ApplicationError(
                f"version {inp.version} was to be evaluated, but the policy servers answered with {sorted(served)}",
                type=ErrorType.EVAL_VERSION_MOVED,
                non_retryable=True,
            )
        values = [case.score(text) for case, (text, _) in zip(eval_set.cases, answers)]
        scores = SetScores(
            set=inp.set,
            version=inp.version,
            metrics={eval_set.metric: sum(values) / len(values)},
            count=len(values),
            served_version=next(iter(served), None),
            at=time.time(),
        )
        log.info(
            "evaluated", set=inp.set, version=inp.version, **scores.metrics, items=len(values),
            seconds=round(time.monotonic() - started, 1),
        )  # fmt: skip
        return scores

    async def _answers(self, cases: list[EvalCase]) -> list[tuple[str, str | None]]:
        """Each case's answer and the weight version that wrote it, `eval.concurrency` at a time."""
        cfg = self.settings.eval
        sampling = ChatSampling(temperature=cfg.temperature, max_tokens=cfg.max_tokens)
        gate = asyncio.Semaphore(cfg.concurrency)

        async def one(case: EvalCase) -> tuple[str, str | None]:
            async with gate:
                prompt = await self.rollout.render(case.messages, None)
                gen = await self.rollout.generate(prompt, await self.rollout.params(sampling, len(prompt)))
                return self.rollout.decode(gen.ids), gen.weight_version

        return await asyncio.gather(*(one(c) for c in cases))

    @activity.defn(name=EVAL_EPISODE_TASKS.name)
    async def eval_episode_tasks(self, inp: EpisodeTasksInput) -> EpisodeTasks:
        try:
            ids = await asyncio.to_thread(first_held_out, inp.setting, inp.count, self.settings)
        except EvalSetError as exc:
            raise ApplicationError(str(exc), type=ErrorType.EVAL_SET_INVALID, non_retryable=True) from exc
        return EpisodeTasks(task_ids=ids)

    @activity.defn(name=RECORD_SCORES.name)
    async def record_eval_scores(self, scores: SetScores) -> RecordResult:
        recorded = await self.store.evals.record(scores)
        if recorded:  # these scores are the ones kept (a retry writes its points again: the same values, harmless)
            # A curve's points, not the evaluation's record: the writer warns on a backend's error, never raises.
            await asyncio.to_thread(self.curves.write_scalars, eval_points(scores), scores.version, scores.at)
        else:
            log.info("scores kept already", set=scores.set, version=scores.version)
        return RecordResult(recorded=recorded)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.curves.close)
        await self.policy.aclose()
        await self.store.aclose()
