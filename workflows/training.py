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
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from contracts.errors import ErrorType
    from contracts.training import (
        ACK_BATCH,
        CHECKPOINT_LABEL,
        CLAIM_BATCH,
        CLAIM_SLACK,
        EXPORT_CHECKPOINT,
        FIND_RESUME_POINT,
        PUBLISH_WEIGHTS,
        TRAIN_STEP,
        TRAINING_WORKFLOW,
        AckInput,
        BatchSize,
        CheckpointRequest,
        ClaimInput,
        ClaimResult,
        ExportInput,
        PublishWeightsInput,
        ResumeInput,
        ResumePoint,
        SavedCheckpoint,
        StepSummary,
        TrainingInput,
        TrainingState,
        TrainingStatus,
        TrainInput,
    )
    from openclaw_rl.search_attributes import POLICY_VERSION
    from workflows.activity_calls import execute

REPUBLISH_ON_ALL_STALE = "republish-current-version-on-all-stale-batch"
"""Patch marker: an all-stale batch means the servers generate with older weights (an engine restarted on the base
model): have them load the current version again, or no sample is ever fresh enough to train on."""
CLAIMS_PER_RUN = 500
"""Idle claims also add history; continue as new after this many."""
KEEP_SAVED_IN_STATUS = 20
KEEP_LOSSES = 20


@workflow.defn(name=TRAINING_WORKFLOW)
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
        if inp.resume:
            await self._resume()
        steps_this_run = claims = 0
        while True:
            await workflow.wait_condition(lambda: not self.state.paused)
            consumer = f"trainer-{self.policy}"
            claim: ClaimResult = await execute(
                CLAIM_BATCH,
                ClaimInput(
                    consumer=consumer,
                    batch_size=self.config.batch_size,
                    source_weights=self.config.source_weights,
                    wait_s=self.config.wait_s,
                ),
                task_queue=q,
                start_to_close=timedelta(seconds=self.config.wait_s) + CLAIM_SLACK,
            )
            claims += 1
            self.waiting = claim.count
            self.state.backlog = claim.backlog
            self._show_progress()
            if claim.count >= self.config.batch_size:
                async with self._busy:
                    await self._step(claim)
                steps_this_run += 1
            if (
                steps_this_run >= self.config.steps_per_run
                or claims >= CLAIMS_PER_RUN
                or workflow.info().is_continue_as_new_suggested()
            ):
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(TrainingInput(policy=self.policy, config=self.config, state=self.state))

    async def _resume(self) -> None:
        q = self.config.trainer_task_queue
        point: ResumePoint = await execute(FIND_RESUME_POINT, ResumeInput(policy=self.policy), task_queue=q)
        if point.version > self.state.version and point.checkpoint:
            self.state.version, self.state.checkpoint = point.version, point.checkpoint
            await self._publish(point.checkpoint, point.version)
            workflow.upsert_search_attributes([POLICY_VERSION.value_set(point.version)])
        self._show_progress()

    async def _publish(self, checkpoint: str, version: int) -> None:
        beat = timedelta(seconds=self.config.heartbeat_timeout_s)
        await execute(
            PUBLISH_WEIGHTS,
            PublishWeightsInput(checkpoint=checkpoint, version=version),
            task_queue=self.config.trainer_task_queue,
            heartbeat=beat,
        )

    async def _step(self, claim: ClaimResult) -> None:
        q = self.config.trainer_task_queue
        beat = timedelta(seconds=self.config.heartbeat_timeout_s)
        try:
            summary: StepSummary = await execute(
                TRAIN_STEP,
                TrainInput(ids=claim.ids, version=self.state.version, max_staleness=self.config.max_staleness),
                task_queue=q,
                start_to_close=timedelta(seconds=self.config.step_timeout_s),
                heartbeat=beat,
            )
        except ActivityError as exc:
            cause = exc.cause if isinstance(exc.cause, ApplicationError) else None
            if cause is not None and cause.type == ErrorType.NON_FINITE_UPDATE:
                # A poisoned batch: nothing was saved; acknowledge it so it is never retried, and count it.
                await execute(ACK_BATCH, AckInput(ids=claim.ids), task_queue=q)
                self.waiting = 0
                self.state.samples_dropped_bad += claim.count
                workflow.logger.warning("batch dropped: its update was not finite", extra={"error": cause.message})
                return
            if cause is not None and cause.type in (ErrorType.DISK_FULL, ErrorType.CHECKPOINT_CORRUPT):
                # An operator must act (free space, restore the checkpoint); the batch stays claimed
                # (unacknowledged), so the first claim after `resume` takes it again.
                self.state.paused, self.state.pause_reason = True, cause.message
                self._show_progress()
                return
            raise
        # Runs started before all-stale batches were skipped published them; replaying those must still do so.
        if summary.trained or not workflow.patched("skip-publish-of-all-stale-batch"):
            await self._publish(summary.checkpoint, summary.version)
        elif self.state.checkpoint and workflow.patched(REPUBLISH_ON_ALL_STALE):
            await self._publish(self.state.checkpoint, self.state.version)
        await execute(ACK_BATCH, AckInput(ids=claim.ids), task_queue=q)
        self.waiting = 0
        self.state.samples_dropped_stale += summary.dropped_stale
        if not summary.trained:  # the whole batch was stale: acknowledged and counted, no new version
            return
        self.state.version, self.state.checkpoint = summary.version, summary.checkpoint
        self.state.steps += 1
        self.state.samples_trained += summary.trained
        self.state.last = summary
        self.state.recent_losses = (self.state.recent_losses + [summary.metrics.loss if summary.metrics else 0.0])[
            -KEEP_LOSSES:
        ]
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(summary.version)])
        self._show_progress()

    def _show_progress(self) -> None:
        """The Temporal UI's "current details" line: the same progress `openclaw-rl train status` prints."""
        s = self.state
        loss = f", last loss {s.recent_losses[-1]:+.4f}" if s.recent_losses else ""
        paused = f" (paused: {s.pause_reason})" if s.pause_reason else " (paused)" if s.paused else ""
        workflow.set_current_details(
            f"policy v{s.version}{paused}: "
            f"next batch {self.waiting}/{self.config.batch_size}, "
            f"{s.backlog} waiting, {s.steps} steps, {s.samples_trained} trained, {s.samples_dropped_stale} stale{loss}"
        )

    @workflow.signal
    def pause(self) -> None:
        self.state.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.state.paused, self.state.pause_reason = False, None

    @workflow.signal
    def set_batch_size(self, req: BatchSize) -> None:
        self.config.batch_size = req.batch_size

    @workflow.update
    async def checkpoint(self, req: CheckpointRequest) -> SavedCheckpoint:
        """Save the current version under a label, kept whatever `keep_versions` prunes."""
        async with self._busy:
            label = req.label or f"policy-{self.state.version}"
            saved: SavedCheckpoint = await execute(
                EXPORT_CHECKPOINT,
                ExportInput(version=self.state.version, label=label),
                task_queue=self.config.trainer_task_queue,
                heartbeat=timedelta(seconds=self.config.heartbeat_timeout_s),
            )
        self.state.saved = (self.state.saved + [saved])[-KEEP_SAVED_IN_STATUS:]
        return saved

    @checkpoint.validator
    def _check_label(self, req: CheckpointRequest) -> None:
        if req.label is not None and not CHECKPOINT_LABEL.match(req.label):
            raise ValueError(
                f"checkpoint label {req.label!r}: use 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )

    @workflow.query
    def status(self) -> TrainingStatus:
        return TrainingStatus(
            policy=self.policy,
            version=self.state.version,
            steps=self.state.steps,
            samples_trained=self.state.samples_trained,
            samples_dropped_stale=self.state.samples_dropped_stale,
            samples_dropped_bad=self.state.samples_dropped_bad,
            paused=self.state.paused,
            pause_reason=self.state.pause_reason,
            batch_size=self.config.batch_size,
            waiting_samples=self.waiting,
            backlog=self.state.backlog,
            recent_losses=self.state.recent_losses,
            last_metrics=self.state.last.metrics if self.state.last else None,
            saved_checkpoints=self.state.saved,
        )
