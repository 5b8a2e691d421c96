"""TrainingWorkflow: one per trained policy, running for as long as the policy learns.

Each step: claim a batch of sample-stream entries (ids only), train on it,
have every policy server load the new checkpoint, bump the version, and only
then acknowledge the entries. A crash anywhere before the acknowledgement
retrains the same ids from the last checkpoint; nothing is lost or trained
twice. Signals pause and resume it and change the batch size; a query reports
status; an update saves a labelled checkpoint; it continues as new every
`steps_per_run` steps.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, Field

    from activities.training import AckInput, ClaimInput, ClaimResult, ExportInput, PublishWeightsInput, SavedCheckpoint, StepSummary, TrainInput
    from openclaw_rl.temporal_client import POLICY_VERSION

CLAIMS_PER_RUN = 500
"""Idle claims also add history; continue as new after this many."""
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KEEP_SAVED_IN_STATUS = 20
KEEP_LOSSES = 20


class TrainingConfig(BaseModel):
    trainer_task_queue: str
    batch_size: int
    source_weights: dict[str, float]
    max_staleness: int
    steps_per_run: int
    wait_s: float
    step_timeout_s: float = 3600.0
    heartbeat_timeout_s: float = 30.0


class TrainingState(BaseModel):
    version: int = 0
    steps: int = 0
    samples_trained: int = 0
    samples_dropped_stale: int = 0
    paused: bool = False
    last: StepSummary | None = None
    saved: list[SavedCheckpoint] = Field(default_factory=list)
    """The latest checkpoints saved on request (newest last)."""
    recent_losses: list[float] = Field(default_factory=list)
    """The last steps' losses, oldest first."""
    backlog: int = 0


class TrainingInput(BaseModel):
    policy: str
    config: TrainingConfig
    state: TrainingState = Field(default_factory=TrainingState)


class TrainingStatus(BaseModel):
    policy: str
    version: int
    steps: int
    samples_trained: int
    samples_dropped_stale: int
    paused: bool
    batch_size: int
    waiting_samples: int
    """Claimed but not yet a full batch."""
    backlog: int
    """Samples in the streams not yet claimed, as of the last claim: how far training lags behind judging."""
    recent_losses: list[float]
    last_metrics: dict
    saved_checkpoints: list[SavedCheckpoint] = Field(default_factory=list)


class BatchSize(BaseModel):
    batch_size: int = Field(ge=1, le=4096)


class CheckpointRequest(BaseModel):
    label: str | None = None
    """Name under checkpoints/saved/; default `policy-<version>`."""


def training_workflow_id(policy: str) -> str:
    return f"training/{policy}"


@workflow.defn(name="TrainingWorkflow")
class TrainingWorkflow:
    @workflow.init
    def __init__(self, inp: TrainingInput) -> None:
        self.policy = inp.policy
        self.config = inp.config
        self.state = inp.state
        self.waiting = 0
        # A step and a checkpoint export never overlap: the export copies the version the workflow reports.
        self._busy = asyncio.Lock()

    @workflow.run
    async def run(self, inp: TrainingInput) -> TrainingState:
        q = self.config.trainer_task_queue
        steps_this_run = claims = 0
        while True:
            await workflow.wait_condition(lambda: not self.state.paused)
            consumer = f"trainer-{self.policy}"
            claim: ClaimResult = await workflow.execute_activity(
                "claim_batch",
                ClaimInput(consumer=consumer, batch_size=self.config.batch_size, source_weights=self.config.source_weights, wait_s=self.config.wait_s),
                result_type=ClaimResult,
                task_queue=q,
                start_to_close_timeout=timedelta(seconds=self.config.wait_s + 60),
                heartbeat_timeout=timedelta(seconds=20),
            )
            claims += 1
            self.waiting = claim.count
            self.state.backlog = claim.backlog
            self._show_progress()
            if claim.count >= self.config.batch_size:
                async with self._busy:
                    await self._step(claim)
                steps_this_run += 1
            if steps_this_run >= self.config.steps_per_run or claims >= CLAIMS_PER_RUN or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(TrainingInput(policy=self.policy, config=self.config, state=self.state))

    async def _step(self, claim: ClaimResult) -> None:
        q = self.config.trainer_task_queue
        summary: StepSummary = await workflow.execute_activity(
            "train_step",
            TrainInput(ids=claim.ids, version=self.state.version, max_staleness=self.config.max_staleness),
            result_type=StepSummary,
            task_queue=q,
            start_to_close_timeout=timedelta(seconds=self.config.step_timeout_s),
            heartbeat_timeout=timedelta(seconds=self.config.heartbeat_timeout_s),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30), non_retryable_error_types=["SampleMissing"]),
        )
        # Runs started before all-stale batches were skipped published them; replaying those must still do so.
        if summary.trained or not workflow.patched("skip-publish-of-all-stale-batch"):
            await workflow.execute_activity(
                "publish_weights",
                PublishWeightsInput(checkpoint=summary.checkpoint, version=summary.version),
                task_queue=q,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=self.config.heartbeat_timeout_s),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
            )
        await workflow.execute_activity("ack_batch", AckInput(ids=claim.ids), task_queue=q, start_to_close_timeout=timedelta(seconds=60))
        self.waiting = 0
        self.state.samples_dropped_stale += summary.dropped_stale
        if not summary.trained:  # the whole batch was stale: acknowledged and counted, no new version
            return
        self.state.version = summary.version
        self.state.steps += 1
        self.state.samples_trained += summary.trained
        self.state.last = summary
        self.state.recent_losses = (self.state.recent_losses + [summary.metrics.get("loss", 0.0)])[-KEEP_LOSSES:]
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(summary.version)])
        self._show_progress()

    def _show_progress(self) -> None:
        """The Temporal UI's "current details" line: the same progress `openclaw-rl train status` prints."""
        s = self.state
        loss = f", last loss {s.recent_losses[-1]:+.4f}" if s.recent_losses else ""
        workflow.set_current_details(
            f"policy v{s.version}{' (paused)' if s.paused else ''}: next batch {self.waiting}/{self.config.batch_size}, "
            f"{s.backlog} waiting, {s.steps} steps, {s.samples_trained} trained, {s.samples_dropped_stale} stale{loss}"
        )

    @workflow.signal
    def pause(self) -> None:
        self.state.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.state.paused = False

    @workflow.signal
    def set_batch_size(self, req: BatchSize) -> None:
        self.config.batch_size = req.batch_size

    @workflow.update
    async def checkpoint(self, req: CheckpointRequest) -> SavedCheckpoint:
        """Save the current version under a label, kept whatever `keep_versions` prunes."""
        async with self._busy:
            label = req.label or f"policy-{self.state.version}"
            saved: SavedCheckpoint = await workflow.execute_activity(
                "export_checkpoint",
                ExportInput(version=self.state.version, label=label),
                result_type=SavedCheckpoint,
                task_queue=self.config.trainer_task_queue,
                start_to_close_timeout=timedelta(minutes=30),
                heartbeat_timeout=timedelta(seconds=self.config.heartbeat_timeout_s),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30), non_retryable_error_types=["LabelTaken", "CheckpointMissing"]),
            )
        self.state.saved = (self.state.saved + [saved])[-KEEP_SAVED_IN_STATUS:]
        return saved

    @checkpoint.validator
    def _check_label(self, req: CheckpointRequest) -> None:
        if req.label is not None and not LABEL.match(req.label):
            raise ValueError(f"checkpoint label {req.label!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")

    @workflow.query
    def status(self) -> TrainingStatus:
        return TrainingStatus(
            policy=self.policy,
            version=self.state.version,
            steps=self.state.steps,
            samples_trained=self.state.samples_trained,
            samples_dropped_stale=self.state.samples_dropped_stale,
            paused=self.state.paused,
            batch_size=self.config.batch_size,
            waiting_samples=self.waiting,
            backlog=self.state.backlog,
            recent_losses=self.state.recent_losses,
            last_metrics=self.state.last.metrics if self.state.last else {},
            saved_checkpoints=self.state.saved,
        )
