"""TrainingWorkflow: one per trained policy, running for as long as the policy learns.

Each step: claim a batch of sample-stream entries (ids only), train on it in the
trainer worker's memory, hand the new version to every policy server from there,
bump the version. A durable checkpoint is written every so many versions or
minutes, beside the next steps; once it is written the workflow confirms it: its
batches are recorded as trained and only then acknowledged. If the trainer
worker dies between two durable checkpoints, the versions since the last one are
gone with it: the workflow goes back to that checkpoint, and the unacknowledged
entries are claimed and trained again (the version numbers keep growing). A
sample is never lost and never counted twice.

Signals pause and resume it, change the batch size and ask for the current
version to be published again; a query reports status; an update saves a
labelled checkpoint; it continues as new every `steps_per_run` steps.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from contracts.errors import ErrorType
    from contracts.training import (
        ACK_BATCH,
        CHECKPOINT_LABEL,
        CLAIM_BATCH,
        CLAIM_SLACK,
        CONFIRM_CHECKPOINT,
        EXPORT_CHECKPOINT,
        FIND_RESUME_POINT,
        FINISH_CHECKPOINT,
        PAUSED_RUN_LASTS_S,
        PUBLISH_VERSION,
        PUBLISH_WEIGHTS,
        START_CHECKPOINT,
        TRAIN_STEP,
        TRAINING_WORKFLOW,
        AckInput,
        BatchSize,
        CheckpointRequest,
        ClaimInput,
        ClaimResult,
        ConfirmInput,
        DurableBatch,
        DurableCheckpoint,
        ExportInput,
        PublishWeightsInput,
        ResumeInput,
        ResumePoint,
        SaveCheckpointInput,
        SavedCheckpoint,
        StepSummary,
        TrainingInput,
        TrainingState,
        TrainingStatus,
        TrainInput,
    )
    from openclaw_rl.search_attributes import POLICY_VERSION
    from workflows.activity_calls import execute
    from workflows.versioning import UPGRADE_AT_CONTINUE

# Retired patches ("publish-from-memory-durable-checkpoints-on-a-cadence", "checkpoint-cadence-waits-for-the-write-
# in-flight", "adopt-a-checkpoint-confirmed-by-a-lost-trainer"; docs/operations.md "Retiring a patch"): their calls
# were deprecated for one release and are gone now. Histories from that release carry their markers marked
# deprecated, which replay without the calls; no open run is older (a training run continues as new within
# CLAIMS_PER_RUN claims, onto the newest code; one paused since before the deprecation, with versioning off, is the
# exception docs/operations.md says how to rule out, and `continue_paused_after_s` now moves paused runs on too).
CLAIMS_PER_RUN = 500
"""Idle claims also add history; continue as new after this many."""
KEEP_SAVED_IN_STATUS = 20
KEEP_LOSSES = 20
LOST_AFTER_S = 20.0


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
        self._checkpointing: asyncio.Task | None = None
        self._checkpoint_epoch = 0
        self._confirming: list[DurableBatch] = []
        """The batches of the durable checkpoint being confirmed (taken out of `undurable` by a loss meanwhile)."""
        self._republish = False

    @workflow.run
    async def run(self, inp: TrainingInput) -> TrainingState:
        q = self.config.trainer_task_queue
        if self.state.checkpoint and self.state.durable_version < self.state.version:
            # Continued from a run that wrote a checkpoint at every version (no marker): that checkpoint is durable
            # and its batches acknowledged. Left at 0, a loss before the first confirmed durable checkpoint would go
            # back to the base model and drop everything trained so far.
            self.state.durable_version, self.state.durable_checkpoint = self.state.version, self.state.checkpoint
        if inp.resume:
            await self._resume()
        steps_this_run = claims = 0
        while True:
            if not await self._wait_unpaused():
                await self._continue_as_new()
            if self.state.trainer_queue is None:
                await self._attach()
            if self._republish:
                self._republish = False
                await self._publish_held("republish")
            consumer = f"trainer-{self.policy}"
            # The claim drops samples too stale to learn from as it reads them, except while the trainer goes back
            # to its durable checkpoint after a loss (the version it trains from is settled only by that step).
            screen = not self.state.from_durable and not self.state.uncounted
            claim: ClaimResult = await execute(
                CLAIM_BATCH,
                ClaimInput(
                    consumer=consumer,
                    batch_size=self.config.batch_size,
                    source_weights=self.config.source_weights,
                    wait_s=self.config.wait_s,
                    skip=self._undurable_ids(),
                    version=self.state.version if screen else None,
                    max_staleness=self.config.max_staleness if screen else None,
                ),
                task_queue=q,
                start_to_close=timedelta(seconds=self.config.wait_s) + CLAIM_SLACK,
            )
            claims += 1
            if claim.dropped_stale:  # named on disk and acknowledged by the claim; counted here, once
                self.state.samples_dropped_stale += claim.dropped_stale
                if claim.count < self.config.batch_size:
                    self._republish = True  # nothing fresh yet: the servers may be behind, as after an all-stale step
            self.waiting = claim.count
            self.state.backlog = claim.backlog
            self._show_progress()
            if claim.count >= self.config.batch_size:
                async with self._busy:
                    await self._step_in_memory(claim)
                steps_this_run += 1
            await self._maybe_checkpoint()
            if (
                steps_this_run >= self.config.steps_per_run
                or claims >= CLAIMS_PER_RUN
                or workflow.info().is_continue_as_new_suggested()
            ):
                await self._continue_as_new()

    async def _wait_unpaused(self) -> bool:
        """Wait while paused; False: paused for `continue_paused_after_s`, time for a fresh run."""
        after = self.config.continue_paused_after_s
        if after is None or not self.state.paused:  # as runs started before the field always waited
            await workflow.wait_condition(lambda: not self.state.paused)
            return True
        try:
            await workflow.wait_condition(lambda: not self.state.paused, timeout=timedelta(seconds=after))
        except asyncio.TimeoutError:
            return False  # a republication asked for meanwhile goes out before the run continues (a lost trainer
            # is noticed there, as in a step)
        return True

    async def _continue_as_new(self) -> None:
        if self._checkpointing is not None:  # an activity in flight does not survive continue-as-new
            await self._checkpointing
        await workflow.wait_condition(workflow.all_handlers_finished)
        while self._republish:  # a flag the next run would not see: the signal was lost
            self._republish = False
            await self._publish_held("republish")
        config = self.config
        if config.continue_paused_after_s is None:  # a fresh run of this build may continue while paused
            config = config.model_copy(update={"continue_paused_after_s": PAUSED_RUN_LASTS_S})
        workflow.continue_as_new(
            TrainingInput(policy=self.policy, config=config, state=self.state),
            initial_versioning_behavior=UPGRADE_AT_CONTINUE,
        )

    async def _resume(self) -> None:
        q = self.config.trainer_task_queue
        point: ResumePoint = await execute(FIND_RESUME_POINT, ResumeInput(policy=self.policy), task_queue=q)
        self.state.trainer_queue = point.trainer_queue or q
        if point.version > self.state.version and point.checkpoint:
            self.state.version, self.state.checkpoint = point.version, point.checkpoint
            self.state.durable_version, self.state.durable_checkpoint = point.version, point.checkpoint
            await self._publish(point.checkpoint, point.version)
            workflow.upsert_search_attributes([POLICY_VERSION.value_set(point.version)])
        self._show_progress()

    # ---- versions in the trainer's memory, durable checkpoints on a cadence ----------------------------------------
    async def _attach(self) -> None:
        """Find a trainer worker (the shared queue reaches any): later calls go to its own queue."""
        point: ResumePoint = await execute(
            FIND_RESUME_POINT, ResumeInput(policy=self.policy), task_queue=self.config.trainer_task_queue
        )
        self.state.trainer_queue = point.trainer_queue or self.config.trainer_task_queue

    async def _on_trainer(self, defn, arg, **timeouts):
        """A call to the trainer worker holding the versions; its silence means the worker is gone."""
        # Its own queue always has a poll waiting while the worker lives, so a call not started within two heartbeats
        # means the process is gone (a step killed mid-way is retried on that queue and ends here too); LOST_AFTER_S
        # at least, for a worker starved of CPU on a loaded machine.
        lost = timedelta(seconds=max(LOST_AFTER_S, 2 * self.config.heartbeat_timeout_s))
        return await execute(
            defn,
            arg,
            task_queue=self.state.trainer_queue or self.config.trainer_task_queue,
            heartbeat=timedelta(seconds=self.config.heartbeat_timeout_s),
            schedule_to_start=lost,
            **timeouts,
        )

    def _trainer_lost(self, why: str) -> None:
        """The versions since the last durable checkpoint are gone: their batches (unacknowledged) are claimed and
        trained again, from that checkpoint, and version numbers go on growing."""
        self.state.lost += 1
        # Their samples are trained again (and counted then): only versions that survive count. Not those of a
        # checkpoint being confirmed: the confirmation goes on (skipped by claims); if it fails, they are taken off.
        gone = [b for b in self.state.undurable if b not in self._confirming]
        self._count(gone, -1)
        self._uncount(gone)
        self.state.undurable = []
        self.state.from_durable = True
        self.state.trainer_queue = None
        workflow.logger.warning(
            "the trainer lost its versions since the last durable checkpoint; training them again",
            extra={"durable_version": self.state.durable_version, "version": self.state.version, "why": why},
        )

    def _count(self, batches: list[DurableBatch], sign: int) -> None:
        """The batches' trained samples, stale samples and missing entries counted (1) or taken off (-1): a loss
        takes its versions off, their entries are claimed again (the stale and missing ones too, still pending) and
        counted when trained again."""
        self.state.samples_trained += sign * sum(len(b.sample_ids) for b in batches)
        self.state.samples_dropped_stale += sign * sum(len(b.stale_ids) for b in batches)
        self.state.samples_dropped_missing += sign * sum(_entries(b.missing) for b in batches)

    def _uncount(self, batches: list[DurableBatch]) -> None:
        if batches:
            self.state.uncounted += [b for b in batches if b not in self.state.uncounted]

    async def _adopt_confirmed(self, claim: ClaimResult) -> ClaimResult | None:
        """Before training again from the durable checkpoint after a loss: a newer one the lost trainer confirmed
        (its answer lost with it) holds batches taken off the count; confirmed again (recorded once, acknowledged),
        it is the one to go back to. Returns the claim without their entries (None: a loss again, or nothing left)."""
        s = self.state
        try:
            point: ResumePoint = await self._on_trainer(FIND_RESUME_POINT, ResumeInput(policy=self.policy))
        except ActivityError as exc:
            if _lost(exc):
                self._trainer_lost(f"looking for a confirmed checkpoint: {exc.cause or exc}")
                return None
            raise
        held = [b for b in s.uncounted if s.durable_version < b.version <= point.version]
        if not point.checkpoint or point.version > s.version:
            held = []  # not a checkpoint of this chain (or none): nothing adopted, nothing taken out of the claim
        if held:
            cp = DurableCheckpoint(version=point.version, path=point.checkpoint, bytes=0, snapshot_s=0.0, write_s=0.0)
            try:
                await self._on_trainer(
                    CONFIRM_CHECKPOINT, ConfirmInput(checkpoint=cp, since=s.durable_version, batches=held)
                )
            except ActivityError as exc:
                if _lost(exc):
                    self._trainer_lost(f"confirming the checkpoint found: {exc.cause or exc}")
                    return None
                raise
            workflow.logger.warning(
                "a durable checkpoint confirmed by the lost trainer holds its batches: training goes on from it",
                extra={"version": point.version, "was": s.durable_version},
            )
            self._count(held, 1)
            s.durable_version, s.durable_checkpoint = point.version, point.checkpoint
            s.checkpoint_clock = workflow.now()
        s.uncounted = []  # the rest are in no confirmed checkpoint: trained again, and counted then
        taken = {(src, i) for b in held for src, entries in b.ids.items() for i in entries}
        ids = {src: [i for i in entries if (src, i) not in taken] for src, entries in claim.ids.items()}
        ids = {src: entries for src, entries in ids.items() if entries}
        if not ids:
            return None
        return claim.model_copy(update={"ids": ids})

    def _undurable_ids(self) -> dict[str, list[str]]:
        ids: dict[str, list[str]] = {}
        # The batches of a checkpoint being confirmed too: a loss meanwhile clears `undurable`, but the confirmation
        # goes on and acknowledges them; claimed and trained again meanwhile, they would be trained twice.
        confirming = [b for b in self._confirming if b not in self.state.undurable]
        for b in self.state.undurable + confirming:
            for src, entries in b.ids.items():
                ids.setdefault(src, []).extend(entries)
        return ids

    async def _step_in_memory(self, claim: ClaimResult) -> None:
        if self.state.from_durable and self._confirming and self._checkpointing is not None:
            # Back to the durable checkpoint after a loss while one is being confirmed: wait for it, or this step
            # would start from the one before and drop the batches the confirmation records as trained.
            await self._checkpointing
        if self.state.from_durable and self.state.uncounted:
            adopted = await self._adopt_confirmed(claim)
            if adopted is None:
                return
            claim = adopted
        try:
            summary: StepSummary = await self._on_trainer(
                TRAIN_STEP,
                TrainInput(
                    ids=claim.ids,
                    version=self.state.version,
                    max_staleness=self.config.max_staleness,
                    durable_version=self.state.durable_version,
                    from_durable=self.state.from_durable,
                ),
                start_to_close=timedelta(seconds=self.config.step_timeout_s),
            )
        except ActivityError as exc:
            if _lost(exc):
                self._trainer_lost(str(exc.cause or exc))
                return
            await self._step_failed(exc, claim)
            return
        if not summary.trained:  # the whole batch was stale: acknowledged and counted, no new version...
            if summary.version > self.state.version:
                # ...unless the trainer, starting again from the durable checkpoint, took it under a new version:
                # the servers get it, so the samples they generate are fresh again (after a restart they may serve
                # a version too old for any sample of theirs to be trained on).
                if not await self._publish_held("durable checkpoint again", summary.version):
                    return
                self.state.from_durable = False
                self.state.version = summary.version
                workflow.upsert_search_attributes([POLICY_VERSION.value_set(summary.version)])
            else:
                await self._publish_held("all stale")  # the servers may be behind (an engine restarted)
            await execute(ACK_BATCH, AckInput(ids=claim.ids), task_queue=self.config.trainer_task_queue)
            self.waiting = 0
            self.state.samples_dropped_stale += summary.dropped_stale
            self.state.samples_dropped_missing += _entries(summary.missing)
            return
        self.state.from_durable = False
        # A step that went on in the trainer's memory after all (a loss seen meanwhile by a checkpoint's call): the
        # batches the loss took off are claimed, trained and counted again, not adopted later.
        self.state.uncounted = []
        if not await self._publish_held("new version", summary.version):
            # The publication may have reached some servers before the trainer went (cut off, then its queue went
            # silent): they serve this number now and would skip the version trained again under it. Spend it.
            self.state.version = summary.version
            return
        self.waiting = 0
        self.state.undurable.append(
            DurableBatch(
                version=summary.version,
                ids=claim.ids,
                batch=summary.batch,
                sample_ids=summary.sample_ids,
                stale_ids=summary.stale_ids,
                missing=summary.missing,
            )
        )
        if self.state.checkpoint_clock is None:
            self.state.checkpoint_clock = workflow.now()
        self._advance(summary, checkpoint=None)

    async def _publish_held(self, why: str, version: int | None = None) -> bool:
        """Every server serves `version` (default: the current one) from the trainer's memory; False when the trainer
        lost it."""
        if version is None:
            if self.state.from_durable:
                return True  # nobody holds the current version since the loss: the next step publishes a new one
            version = self.state.version
        if version == 0 and self.state.durable_version == 0:
            return True  # the base model: every server serves it
        try:
            await self._on_trainer(
                PUBLISH_VERSION,
                PublishWeightsInput(
                    checkpoint="", version=version, from_memory=True, durable_version=self.state.durable_version
                ),
            )
        except ActivityError as exc:
            if _lost(exc):
                self._trainer_lost(f"{why}: {exc.cause or exc}")
                return False
            raise
        return True

    async def _maybe_checkpoint(self) -> None:
        """When due, a durable checkpoint of the current version: its state copied aside now (the next step waits
        for that only), written and confirmed beside the next steps."""
        s = self.state
        in_flight = self._checkpointing is not None and self._checkpoint_epoch == s.lost  # not one a loss voided
        if in_flight and self._checkpoint_due():
            await self._checkpointing  # the writes fall behind the cadence: the steps wait for them
        if self._checkpointing is not None or not s.undurable or s.trainer_queue is None:
            return
        if s.pause_reason:  # paused by a failure: nothing to write to
            return
        if not self._checkpoint_due():
            return
        req = SaveCheckpointInput(version=s.version, since=s.durable_version)
        try:
            await self._on_trainer(START_CHECKPOINT, req)
        except ActivityError as exc:
            self._checkpoint_failed(exc, s.lost)
            return
        self._checkpoint_epoch = s.lost
        self._checkpointing = asyncio.ensure_future(self._finish_checkpoint(req, s.lost))

    def _checkpoint_due(self) -> bool:
        s = self.state
        versions = s.version - s.durable_version
        waited = (workflow.now() - s.checkpoint_clock).total_seconds() if s.checkpoint_clock else 0.0
        return versions >= self.config.checkpoint_every_versions or waited >= self.config.checkpoint_every_s

    async def _finish_checkpoint(self, req: SaveCheckpointInput, epoch: int) -> None:
        """The durable checkpoint on disk, then confirmed: its batches recorded as trained and acknowledged. A loss
        meanwhile (`epoch` changed) leaves it unconfirmed: its batches are trained again."""
        try:
            cp: DurableCheckpoint = await self._on_trainer(FINISH_CHECKPOINT, req)
            if epoch != self.state.lost:
                return
            batches = [b for b in self.state.undurable if b.version <= req.version]
            self._confirming = batches
            await self._on_trainer(CONFIRM_CHECKPOINT, ConfirmInput(checkpoint=cp, since=req.since, batches=batches))
        except ActivityError as exc:
            # A confirmation that failed leaves its batches to be trained again: uncounted here after a loss meanwhile
            # (which left them counted), by the loss below otherwise (they are no longer confirming then).
            confirming, self._confirming = self._confirming, []
            if epoch != self.state.lost:
                self._count(confirming, -1)
                self._uncount(confirming)
            self._checkpoint_failed(exc, epoch)
            return
        finally:
            self._checkpointing, self._confirming = None, []
        s = self.state
        s.durable_version, s.durable_checkpoint, s.last_checkpoint = req.version, cp.path, cp
        s.undurable = [b for b in s.undurable if b.version > req.version]
        s.checkpoint_clock = workflow.now()
        self._show_progress()

    def _checkpoint_failed(self, exc: ActivityError, epoch: int) -> None:
        if _lost(exc):
            if epoch == self.state.lost:
                self._trainer_lost(f"checkpoint: {exc.cause or exc}")
        elif _error_type(exc) in (ErrorType.DISK_FULL, ErrorType.CHECKPOINT_MISSING):
            self.state.paused, self.state.pause_reason = True, getattr(exc.cause, "message", str(exc))
            self._show_progress()
        else:
            workflow.logger.warning(
                "durable checkpoint failed; tried again at the next cadence", extra={"error": str(exc)}
            )

    # ---- the servers told to load a checkpoint from disk (a resume from the newest one) ------------------------------

    async def _publish(self, checkpoint: str, version: int) -> None:
        beat = timedelta(seconds=self.config.heartbeat_timeout_s)
        await execute(
            PUBLISH_WEIGHTS,
            PublishWeightsInput(checkpoint=checkpoint, version=version),
            task_queue=self.config.trainer_task_queue,
            heartbeat=beat,
        )

    async def _step_failed(self, exc: ActivityError, claim: ClaimResult) -> None:
        """A train step that failed for good: a poisoned batch is dropped and counted; what an operator must fix
        pauses training with the reason; anything else fails the workflow."""
        q = self.config.trainer_task_queue
        cause = exc.cause if isinstance(exc.cause, ApplicationError) else None
        if cause is not None and cause.type == ErrorType.NON_FINITE_UPDATE:
            # A poisoned batch: nothing was saved; acknowledge it so it is never retried, and count it.
            await execute(ACK_BATCH, AckInput(ids=claim.ids), task_queue=q)
            self.waiting = 0
            self.state.samples_dropped_bad += claim.count
            workflow.logger.warning("batch dropped: its update was not finite", extra={"error": cause.message})
            return
        if cause is not None and cause.type in (
            ErrorType.DISK_FULL,
            ErrorType.CHECKPOINT_CORRUPT,
            ErrorType.CHECKPOINT_MISSING,
        ):
            # An operator must act (free space, restore the checkpoint); the batch stays claimed
            # (unacknowledged), so the first claim after `resume` takes it again.
            self.state.paused, self.state.pause_reason = True, cause.message
            self._show_progress()
            return
        raise exc

    def _advance(self, summary: StepSummary, checkpoint: str | None) -> None:
        s = self.state
        s.version, s.checkpoint = summary.version, checkpoint
        s.steps += 1
        s.samples_trained += summary.trained
        s.samples_dropped_stale += summary.dropped_stale
        s.samples_dropped_missing += _entries(summary.missing)
        s.last = summary
        s.recent_losses = (s.recent_losses + [summary.metrics.loss if summary.metrics else 0.0])[-KEEP_LOSSES:]
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

    @workflow.signal
    def republish(self) -> None:
        """A server serves an older version than the trainer holds (it restarted): every server is given the current
        version again from the trainer's memory (those serving it already reload nothing)."""
        self._republish = True

    @workflow.update
    async def checkpoint(self, req: CheckpointRequest) -> SavedCheckpoint:
        """Save the current version under a label, kept whatever `keep_versions` prunes."""
        async with self._busy:
            label = req.label or f"policy-{self.state.version}"
            export = ExportInput(version=self.state.version, label=label)
            # the current version may live in the trainer's memory only
            saved: SavedCheckpoint = await self._on_trainer(EXPORT_CHECKPOINT, export)
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
            samples_dropped_missing=self.state.samples_dropped_missing,
            paused=self.state.paused,
            pause_reason=self.state.pause_reason,
            batch_size=self.config.batch_size,
            waiting_samples=self.waiting,
            backlog=self.state.backlog,
            recent_losses=self.state.recent_losses,
            last_metrics=self.state.last.metrics if self.state.last else None,
            saved_checkpoints=self.state.saved,
            durable_version=self.state.durable_version,
            versions_since_durable=self.state.version - self.state.durable_version,
            samples_since_durable=sum(len(b.sample_ids) for b in self.state.undurable),
            trainer_lost=self.state.lost,
            last_checkpoint=self.state.last_checkpoint,
            trainer_memory=self.state.last.memory if self.state.last else {},
        )


def _entries(ids: dict[str, list[str]]) -> int:
    return sum(len(v) for v in ids.values())


def _error_type(exc: ActivityError) -> str | None:
    cause = exc.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def _lost(exc: ActivityError) -> bool:
    """The trainer worker no longer holds the versions: it says so (restarted since), or its queue went silent (it
    died: a call not picked up, or a step that stopped heartbeating)."""
    return _error_type(exc) == ErrorType.TRAINER_LOST or isinstance(exc.cause, TimeoutError)
