"""The TrainingWorkflow: its input from settings, and starting it (used by `up`, `openclaw-rl train` and the
benchmarks)."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.common import Priority, WorkflowIDConflictPolicy

from contracts.priorities import Rank
from contracts.training import PAUSED_RUN_LASTS_S, TrainingConfig, TrainingInput, training_workflow_id
from openclaw_rl.settings import Pool, Settings
from workflows.training import TrainingWorkflow


def training_input(settings: Settings) -> TrainingInput:
    t = settings.training
    return TrainingInput(
        policy=settings.api.model_name,
        config=TrainingConfig(
            trainer_task_queue=settings.temporal.task_queue(Pool.TRAINER),
            batch_size=t.batch_size,
            source_weights=t.source_weights,
            max_staleness=t.max_staleness,
            steps_per_run=t.steps_per_run,
            wait_s=t.wait_s,
            heartbeat_timeout_s=t.heartbeat_timeout_s,
            checkpoint_every_versions=t.checkpoint.every_versions,
            checkpoint_every_s=t.checkpoint.every_s,
            continue_paused_after_s=PAUSED_RUN_LASTS_S,
        ),
        resume=True,  # a fresh start (the previous run failed or was terminated) continues from the newest checkpoint
    )


async def start_training(client: Client, settings: Settings) -> str:
    """Start the policy's TrainingWorkflow unless it already runs; returns its workflow id."""
    inp = training_input(settings)
    wf_id = training_workflow_id(inp.policy)
    await client.start_workflow(
        TrainingWorkflow.run,
        inp,
        id=wf_id,
        task_queue=settings.temporal.task_queue(Pool.WORKFLOW),
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"training {inp.policy}",
        priority=Priority(priority_key=Rank.TRAINING),
    )
    return wf_id


async def request_republish(client: Client, settings: Settings) -> None:
    """Ask the policy's TrainingWorkflow to give every server the current version again (a server restarted and
    serves an older one that no checkpoint folder can bring up to date)."""
    from workflows.training import TrainingWorkflow

    handle = client.get_workflow_handle(training_workflow_id(settings.api.model_name))
    await handle.signal(TrainingWorkflow.republish)
