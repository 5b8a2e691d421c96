"""Users' progress reports (contracts.progress): a report now (`openclaw-rl users report`, `POST /v1/me/progress`)
and the progress schedule (created, updated or deleted by `up`, idempotently)."""

from __future__ import annotations

from datetime import timedelta

import structlog
from temporalio.client import Client, ScheduleActionStartWorkflow, ScheduleHandle, ScheduleIntervalSpec, ScheduleSpec
from temporalio.common import Priority, WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from contracts.chat import tenant_of
from contracts.priorities import Rank
from contracts.progress import (
    ProgressInput,
    ProgressSummary,
    RoundInput,
    progress_schedule_id,
    report_workflow_id,
)
from control.schedules import delete_schedule, put_schedule
from openclaw_rl.settings import Pool, Settings
from workflows.progress import ProgressReportWorkflow, ProgressRoundWorkflow

log = structlog.get_logger(__name__)


def progress_input(settings: Settings, user_id: str, force: bool = False) -> ProgressInput:
    return ProgressInput(
        tenant=tenant_of(user_id),
        max_turns=settings.eval.progress.max_turns,
        force=force,
        policy_task_queue=settings.temporal.task_queue(Pool.POLICY),
        judge_task_queue=settings.temporal.task_queue(Pool.JUDGE),
        answer_timeout_s=settings.session.generate_timeout_s,
    )


async def start_report(client: Client, settings: Settings, user_id: str, force: bool = True):
    """Start the user's report, or join the one running (its id is the user's): the workflow handle."""
    return await client.start_workflow(
        ProgressReportWorkflow.run,
        progress_input(settings, user_id, force=force),
        id=report_workflow_id(tenant_of(user_id)),
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary="progress report",
        priority=Priority(priority_key=Rank.EVALUATION),
    )


async def run_report(client: Client, settings: Settings, user_id: str, force: bool = True) -> ProgressSummary:
    handle = await start_report(client, settings, user_id, force=force)
    return await handle.result()


def round_input(settings: Settings) -> RoundInput:
    return RoundInput(
        max_turns=settings.eval.progress.max_turns,
        policy_task_queue=settings.temporal.task_queue(Pool.POLICY),
        judge_task_queue=settings.temporal.task_queue(Pool.JUDGE),
        answer_timeout_s=settings.session.generate_timeout_s,
    )


def schedule_action(settings: Settings) -> ScheduleActionStartWorkflow:
    return ScheduleActionStartWorkflow(
        ProgressRoundWorkflow.run,
        round_input(settings),
        id=f"progress/{settings.api.model_name}/round",  # Temporal appends each run's time
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        static_summary="a progress report for every user with held-out turns and news",
        priority=Priority(priority_key=Rank.EVALUATION),
    )


def schedule_wanted(settings: Settings) -> bool:
    p = settings.eval.progress
    return p.held_out_share > 0 and p.every_s > 0


async def ensure_progress_schedule(client: Client, settings: Settings) -> ScheduleHandle | None:
    """Create the progress schedule, or bring an existing one up to the settings (its paused state kept); with no
    held-out share or `every_s = 0`, delete it. Returns its handle (None when off)."""
    schedule_id = progress_schedule_id(settings.api.model_name)
    if not schedule_wanted(settings):
        await delete_schedule(client, schedule_id)
        return None
    spec = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=settings.eval.progress.every_s))])
    handle, created = await put_schedule(
        client, schedule_id, schedule_action(settings), spec, "openclaw-rl up: users' progress reports"
    )
    if created:
        log.info("progress schedule created", schedule_id=schedule_id, every_s=settings.eval.progress.every_s)
    return handle
