"""Evaluation of policy versions: the EvaluationWorkflow's input from settings, the eval schedule (created or
updated by `up`, idempotently) and one evaluation started now (`openclaw-rl eval run`)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import structlog
from temporalio.client import (
    Client,
    ScheduleActionStartWorkflow,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import Priority

from contracts.episodes import EpisodeConfig
from contracts.evaluation import (
    EPISODES_PREFIX,
    EvalConfig,
    EvalInput,
    EvalResult,
    eval_schedule_id,
)
from contracts.priorities import Rank
from control.episodes import episode_config
from control.schedules import delete_schedule, put_schedule
from evals.registry import configured_sets
from openclaw_rl.settings import Pool, Settings
from workflows.evaluation import EvaluationWorkflow

log = structlog.get_logger(__name__)


def eval_config(settings: Settings, sets: list[str] | None = None, every_versions: int | None = None) -> EvalConfig:
    """UnknownSetting (a LookupError) for an episode set of a setting no environment provides."""
    sets = sets if sets is not None else configured_sets(settings)
    return EvalConfig(
        sets=sets,
        every_versions=settings.eval.every_versions if every_versions is None else every_versions,
        policy_task_queue=settings.temporal.task_queue(Pool.POLICY),
        generate_timeout_s=settings.session.generate_timeout_s,
        episodes=episode_configs(settings, sets),
        episode_tasks=settings.eval.episode_tasks,
        episode_samples=settings.eval.episode_samples,
        episode_parallel=settings.eval.concurrency,
    )


def episode_configs(settings: Settings, sets: list[str]) -> dict[str, EpisodeConfig]:
    """How each episode set's episodes run: its setting's own configuration (steps, temperature, tokens), with no
    step votes: an evaluation scores outcomes, and votes would only load the judge."""
    names = [s.removeprefix(EPISODES_PREFIX) for s in sets if s.startswith(EPISODES_PREFIX)]
    return {setting: episode_config(settings, setting, prm_votes=0) for setting in names}


def schedule_action(settings: Settings, every_versions: int | None = None) -> ScheduleActionStartWorkflow:
    policy = settings.api.model_name
    return ScheduleActionStartWorkflow(
        EvaluationWorkflow.run,
        EvalInput(config=eval_config(settings, every_versions=every_versions)),
        id=f"eval/{policy}/scheduled",  # Temporal appends each run's time
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        static_summary=f"evaluate every {every_versions or settings.eval.every_versions}th version of {policy}",
        priority=Priority(priority_key=Rank.EVALUATION),
    )


def schedule_spec(settings: Settings) -> ScheduleSpec:
    return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=settings.eval.check_every_s))])


async def ensure_eval_schedule(client: Client, settings: Settings) -> ScheduleHandle | None:
    """Create the eval schedule, or bring an existing one's action and interval up to the settings (its paused
    state is kept); with `eval.every_versions = 0`, delete it. Returns its handle (None when off)."""
    schedule_id = eval_schedule_id(settings.api.model_name)
    if settings.eval.every_versions == 0:
        await delete_eval_schedule(client, settings)
        return None
    note = "openclaw-rl up: evaluates every Nth policy version"
    handle, created = await put_schedule(client, schedule_id, schedule_action(settings), schedule_spec(settings), note)
    if created:
        log.info("eval schedule created", schedule_id=schedule_id, every_versions=settings.eval.every_versions)
    return handle


async def set_every_versions(client: Client, settings: Settings, every: int) -> None:
    """Change the running schedule's N (until `up` applies the settings again)."""
    handle = client.get_schedule_handle(eval_schedule_id(settings.api.model_name))

    def updated(current: ScheduleUpdateInput) -> ScheduleUpdate:
        action = schedule_action(settings, every_versions=every)
        return ScheduleUpdate(schedule=dataclasses.replace(current.description.schedule, action=action))

    await handle.update(updated)


async def delete_eval_schedule(client: Client, settings: Settings) -> bool:
    """Whether there was one to delete."""
    return await delete_schedule(client, eval_schedule_id(settings.api.model_name))


async def run_evaluation(
    client: Client, settings: Settings, sets: list[str] | None = None, version: int | None = None
) -> EvalResult:
    """One evaluation now, as a workflow, whatever `every_versions` says: the version asked for (the base model
    included) or the latest published one."""
    inp = EvalInput(config=eval_config(settings, sets=sets, every_versions=0), version=version, skip_base=False)
    return await client.execute_workflow(
        EvaluationWorkflow.run,
        inp,
        id=f"eval/{settings.api.model_name}/run-{uuid.uuid4().hex[:12]}",
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        static_summary="evaluation run from the command line",
        priority=Priority(priority_key=Rank.EVALUATION),
    )
