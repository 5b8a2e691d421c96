"""TrainingWorkflow against the time-skipping test server, with mock trainer activities.

New runs publish from memory (PUBLISH_FROM_MEMORY): each version is trained and published in the trainer worker's
memory, calls about the trainer go to the worker's own queue (`trainer_workers` runs the mocks there too), trained
batches stay unacknowledged (and skipped by later claims) until a durable checkpoint holds them, and a TrainerLost
(or a silent trainer queue) goes back to the last durable checkpoint. Runs that checkpoint every version replay on
the old branch (test_replay.py).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from contracts.errors import ErrorType
from contracts.training import (
    TRAINING_WORKFLOW,
    AckInput,
    ClaimResult,
    DurableBatch,
    PublishWeightsInput,
    SaveCheckpointInput,
    TrainingInput,
    TrainingState,
    TrainingStatus,
    TrainInput,
    training_workflow_id,
)
from tests.workflows.mocks import (
    TrainerActivities,
    batch,
    eventually,
    new_queue,
    next_run,
    trainer_workers,
    training_input,
)
from workflows.activity_calls import execute
from workflows.training import TrainingWorkflow

pytestmark = pytest.mark.timeout(60)  # a server that stopped skipping time would otherwise wait out the 600 s default

TRAINER_CALLS = {"train_step", "publish_version", "start_checkpoint", "finish_checkpoint", "confirm_checkpoint"}
"""The calls about the trainer's in-memory versions: they go to the trainer worker's own queue."""


def skip_of(*claims: ClaimResult) -> dict[str, list[str]]:
    """The `skip` a claim carries while these batches wait for a durable checkpoint."""
    return {"test": [i for c in claims for i in c.ids["test"]]} if claims else {}


def from_memory(version: int, durable: int = 0) -> PublishWeightsInput:
    return PublishWeightsInput(checkpoint="", version=version, from_memory=True, durable_version=durable)


def step(claim: ClaimResult, version: int, durable: int = 0, from_durable: bool = False) -> TrainInput:
    return TrainInput(
        ids=claim.ids, version=version, max_staleness=2, durable_version=durable, from_durable=from_durable
    )


def durable(claim: ClaimResult, version: int) -> DurableBatch:
    """A batch as the workflow keeps it until a durable checkpoint holds it (the mock's digest, no stale ids)."""
    return DurableBatch(version=version, ids=claim.ids, batch="digest", sample_ids=claim.ids["test"])


async def start_training(env: WorkflowEnvironment, queue: str, inp: TrainingInput | None = None, **config):
    return await env.client.start_workflow(
        TrainingWorkflow.run,
        inp or training_input(queue, **config),
        id=training_workflow_id(f"test-{uuid.uuid4()}"),
        task_queue=queue,
    )


async def status(handle: WorkflowHandle) -> TrainingStatus:
    return await handle.query(TrainingWorkflow.status)


async def until_status(handle: WorkflowHandle, check, what: str) -> TrainingStatus:
    seen: list[TrainingStatus] = []

    async def ok() -> bool:
        seen[:] = [await status(handle)]
        return check(seen[0])

    await eventually(ok, what=what)
    return seen[0]


async def activity_completed(handle: WorkflowHandle, name: str) -> int:
    """How many calls of activity `name` the workflow's history shows completed."""
    history = await handle.fetch_history()
    names = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    return sum(
        1
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
        and names[e.activity_task_completed_event_attributes.scheduled_event_id] == name
    )


# ---- the five tests of the flow before, on the new flow --------------------------------------------------------------


async def test_all_stale_batch_is_acknowledged_without_a_new_version(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities(stale={"1-0", "1-1"})
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1", backlog=4))
        await eventually(lambda: len(trainer.acked) == 1, what="the stale batch to be acknowledged")
        assert trainer.acked == [AckInput(ids={"test": ["1-0", "1-1"]})]
        assert trainer.versions_published == [] and trainer.published == []  # version 0: the base model, served
        assert trainer.calls[:4] == ["find_resume_point", "claim_batch", "train_step", "ack_batch"]
        s = await status(handle)
        assert (s.version, s.steps, s.samples_trained, s.samples_dropped_stale) == (0, 0, 0, 2)
        assert s.backlog == 4 and s.recent_losses == []

        b2 = batch("2-0", "2-1")
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 3, what="the next batch to be trained")
        assert trainer.steps[1] == step(b2, version=0)  # trained from the same version: the stale batch made none
        assert trainer.versions_published == [from_memory(1)]
        assert len(trainer.acked) == 1  # the trained batch waits for a durable checkpoint
        s = await status(handle)
        assert (s.version, s.steps, s.samples_trained, s.samples_dropped_stale) == (1, 1, 2, 2)
        await handle.terminate("test over")


async def test_an_all_stale_batch_after_a_version_has_the_servers_serve_it_again(env: WorkflowEnvironment):
    """Every sample stale means the servers generate with older weights (an engine restarted on the base model);
    the `republish` signal asks the same."""
    q = new_queue()
    trainer = TrainerActivities(stale={"2-0", "2-1"})
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.versions_published) == 1, what="the first version")
        trainer.feed(batch("2-0", "2-1"))
        await eventually(lambda: len(trainer.acked) == 1, what="the stale batch")
        assert trainer.versions_published == [from_memory(1)] * 2
        assert trainer.calls[5:8] == ["train_step", "publish_version", "ack_batch"]  # served again, then acked
        assert trainer.acked == [AckInput(ids={"test": ["2-0", "2-1"]})]  # only the stale batch: no version of it
        s = await status(handle)
        assert (s.version, s.samples_dropped_stale) == (1, 2)

        await eventually(lambda: len(trainer.claims) == 3, what="the claim after the stale batch")
        await handle.signal(TrainingWorkflow.republish)
        trainer.feed(batch())  # the claim returns empty; the loop serves the version again before the next one
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after the republish")
        assert trainer.versions_published == [from_memory(1)] * 3
        assert trainer.calls[-2:] == ["publish_version", "claim_batch"]
        await handle.terminate("test over")


async def test_stale_samples_a_claim_dropped_are_counted_once_and_the_servers_serve_the_version_again(
    env: WorkflowEnvironment,
):
    """The claim drops a stale backlog itself (activities.stale_screen); the workflow asks it to with the version it
    trains from and its bound, counts what it dropped, and, with nothing fresh to train, serves its version again."""
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.versions_published) == 1, what="the first version")
        assert (trainer.claims[0].version, trainer.claims[0].max_staleness) == (0, 2)
        trainer.feed(ClaimResult(ids={}, dropped_stale=3))
        await eventually(lambda: len(trainer.claims) == 3, what="the claim after the drops")
        assert trainer.versions_published == [from_memory(1)] * 2  # nothing fresh came: the servers may be behind
        assert trainer.calls[-2:] == ["publish_version", "claim_batch"]
        assert (trainer.claims[-1].version, trainer.claims[-1].max_staleness) == (1, 2)
        s = await status(handle)
        assert (s.version, s.steps, s.samples_trained, s.samples_dropped_stale) == (1, 1, 2, 3)
        await handle.terminate("test over")


async def test_a_run_paused_for_long_continues_as_new_still_paused(skipping_env: WorkflowEnvironment):
    """A paused run makes no claims, so it would never reach its continue-as-new: after `continue_paused_after_s` it
    continues as new (the current build runs it, so old patches can go), still paused, and resumes on the signal."""
    env, q = skipping_env, new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        inp = training_input(q, checkpoint_every_s=10**6)
        inp = inp.model_copy(update={"config": inp.config.model_copy(update={"continue_paused_after_s": 3600.0})})
        handle = await start_training(env, q, inp)
        first_run = (await handle.describe()).run_id
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.claims) == 2, what="the claim after the first step")
        await handle.signal(TrainingWorkflow.pause)
        trainer.feed(batch())
        await until_status(handle, lambda s: s.paused, "the pause")
        await env.sleep(timedelta(minutes=30))
        assert (await handle.describe()).run_id == first_run  # not yet

        await env.sleep(timedelta(hours=1))
        latest = env.client.get_workflow_handle(handle.id)
        await eventually(lambda: _run_of(latest, first_run), what="the paused run to continue as new")
        s = await status(latest)
        assert (s.paused, s.version, s.samples_trained) == (True, 1, 2)
        assert len(trainer.claims) == 2  # nothing claimed while paused, by either run

        await latest.signal(TrainingWorkflow.resume)
        await eventually(lambda: len(trainer.claims) == 3, what="claiming to resume in the new run")
        await latest.terminate("test over")


async def _run_of(handle: WorkflowHandle, not_run: str) -> bool:
    return (await handle.describe()).run_id != not_run


async def test_pause_stops_claiming_until_resumed(skipping_env: WorkflowEnvironment):
    env, q = skipping_env, new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_s=10**6)  # the 2 h below must not make one due
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.claims) == 2, what="the claim after the first step")
        assert trainer.calls == ["find_resume_point", "claim_batch", "train_step", "publish_version", "claim_batch"]
        assert (await status(handle)).version == 1

        await handle.signal(TrainingWorkflow.pause)
        trainer.feed(batch("2-0", backlog=7))  # the claim in flight returns short of a batch; the loop then waits
        await until_status(
            handle,
            lambda s: s.paused and s.backlog == 7 and s.waiting_samples == 1,
            "the short claim to be processed",
        )
        await env.sleep(timedelta(hours=2))
        await asyncio.sleep(0.3)
        assert len(trainer.claims) == 2

        await handle.signal(TrainingWorkflow.resume)
        await eventually(lambda: len(trainer.claims) == 3, what="claiming to resume")
        trainer.feed(batch("2-0", "3-0"))
        await eventually(lambda: len(trainer.claims) == 4, what="the step after resuming")
        assert trainer.calls[5:] == ["claim_batch", "train_step", "publish_version", "claim_batch"]
        assert trainer.steps[1].version == 1
        assert trainer.versions_published[1] == from_memory(2)
        s = await status(handle)
        assert (s.version, s.steps, s.samples_trained, s.paused) == (2, 2, 4, False)
        assert s.recent_losses == [0.5, 0.25]
        assert trainer.acked == [] and trainer.checkpoints_started == []
        await handle.terminate("test over")


async def test_a_fresh_start_resumes_from_the_newest_checkpoint_and_serves_it(env: WorkflowEnvironment):
    """A terminated or failed TrainingWorkflow started again must not train version 1 over policy-1 again."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.resume_version = 7
    async with trainer_workers(env, q, trainer) as own:
        handle = await start_training(env, q, training_input(q).model_copy(update={"resume": True}))
        await eventually(lambda: len(trainer.claims) == 1, what="the first claim")
        # the servers load v7 before anything; the worker that answered is the one trained on (no second look-up)
        assert trainer.calls == ["find_resume_point", "publish_weights", "claim_batch"]
        assert trainer.published == [PublishWeightsInput(checkpoint="/ckpt/policy-7", version=7)]
        s = await status(handle)
        assert (s.version, s.durable_version, s.versions_since_durable) == (7, 7, 0)

        b1 = batch("1-0", "1-1")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.versions_published) == 1, what="the first step")
        assert trainer.steps == [step(b1, version=7, durable=7)]  # a trainer holding nothing loads v7 for it
        assert trainer.versions_published == [from_memory(8, durable=7)]
        assert ("train_step", own) in trainer.queues
        await handle.terminate("test over")


async def test_a_non_finite_update_drops_its_batch(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.fail_with = {"nan-0": ErrorType.NON_FINITE_UPDATE}
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q)
        trainer.feed(batch("nan-0", "nan-1"))
        await eventually(lambda: len(trainer.acked) == 1, what="the poisoned batch to be acknowledged")
        assert trainer.acked == [AckInput(ids={"test": ["nan-0", "nan-1"]})]  # never retried
        s = await status(handle)
        assert (s.version, s.samples_dropped_bad, s.paused) == (0, 2, False)
        assert trainer.versions_published == []  # nothing of a non-finite step is ever served

        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.versions_published) == 1, what="the next batch to be trained")
        assert trainer.claims[1].skip == {}  # the dropped batch is acknowledged, not waiting for a checkpoint
        await until_status(handle, lambda s: s.version == 1, "the version after the publication")
        await handle.terminate("test over")


async def test_a_confirmation_that_finds_no_checkpoint_pauses_training_and_a_later_one_holds_the_batches(
    env: WorkflowEnvironment,
):
    """The trainer refuses to confirm a checkpoint that is not on disk whole (CHECKPOINT_MISSING, nothing recorded or
    acknowledged): training pauses with the reason, the batches stay counted and waiting (the trainer still holds
    their versions); after `resume` the next durable checkpoint holds them."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.inject("confirm_checkpoint", ErrorType.CHECKPOINT_MISSING)
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        trainer.feed(b1)
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.paused, "training to pause itself")
        assert s.pause_reason and (s.durable_version, s.versions_since_durable, s.samples_trained) == (0, 2, 4)
        assert trainer.acked == [] and len(trainer.confirmed) == 1

        await handle.signal(TrainingWorkflow.resume)
        trainer.feed(batch())  # the claim beside the checkpoint comes back empty: the checkpoint is due again
        await eventually(lambda: len(trainer.confirmed) == 2, what="the next checkpoint to be confirmed")
        assert trainer.confirmed[1].batches == [durable(b1, 1), durable(b2, 2)]
        s = await until_status(handle, lambda s: s.durable_version == 2, "the checkpoint to be taken in")
        assert (s.paused, s.samples_trained, s.versions_since_durable) == (False, 4, 0)
        await handle.terminate("test over")


async def test_a_missing_sample_is_dropped_and_counted_once_and_training_goes_on(env: WorkflowEnvironment):
    """An entry gone from its stream when its step reads it (trimmed, deleted): before, the step failed with
    SAMPLE_MISSING and the whole workflow with it. Now the step drops it and trains the rest; it is counted once
    (taken off with a version a loss takes, counted again when that batch is trained again), goes to the durable
    checkpoint's confirmation with its batch (recorded and acknowledged there), and a batch of nothing but missing
    entries is acknowledged at once."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.missing = {"1-1"}
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        s = await until_status(handle, lambda s: s.version == 1, "version 1, trained without the missing entry")
        assert (s.samples_trained, s.samples_dropped_missing, s.paused) == (1, 1, False)
        # The next claim skips b1, which waits for a durable checkpoint (the status can come before that claim).
        await eventually(lambda: trainer.claims[-1].skip == skip_of(b1), what="a claim that skips b1")

        trainer.inject("train_step", ErrorType.TRAINER_LOST)  # version 1 is gone, and its count with it
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.trainer_lost == 1, "the loss")
        assert (s.samples_trained, s.samples_dropped_missing) == (0, 0)
        trainer.feed(b1)  # pending again, the missing entry with it (Redis hands pending entries back first)
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.durable_version == 2 and s.version == 3, "b1 and b2 trained")
        assert trainer.confirmed[0].batches == [
            DurableBatch(version=2, ids=b1.ids, batch="digest", sample_ids=["1-0"], missing={"test": ["1-1"]})
        ]
        assert (s.samples_trained, s.samples_dropped_missing) == (3, 1)

        trainer.missing |= {"3-0", "3-1"}  # nothing left to train: acknowledged at once, counted
        trainer.feed(b3)
        await eventually(lambda: len(trainer.acked) == 1, what="the all-missing batch to be acknowledged")
        assert trainer.acked == [AckInput(ids=b3.ids)]
        s = await until_status(handle, lambda s: s.samples_dropped_missing == 3, "the all-missing batch counted")
        assert (s.version, s.samples_trained, s.paused) == (3, 3, False)
        trainer.feed(batch("4-0", "4-1"))
        await until_status(handle, lambda s: s.version == 4, "training to go on")
        await handle.terminate("test over")


async def test_a_stale_sample_in_a_lost_version_is_counted_once_when_its_batch_is_trained_again(
    env: WorkflowEnvironment,
):
    """A step that trains most of its batch and drops one sample as stale counts it with the version; a loss of that
    version leaves its entries pending, the stale one too, and the batch trained again drops it again. Before, the
    loss took the trained samples off but not the stale one, so it was counted twice (the chaos test's kill of the
    trainer: more samples dropped than published)."""
    q = new_queue()
    trainer = TrainerActivities(stale={"1-1"})
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        trainer.feed(b1)
        s = await until_status(handle, lambda s: s.version == 1, "version 1, trained without the stale sample")
        assert (s.samples_trained, s.samples_dropped_stale) == (1, 1)

        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.trainer_lost == 1, "the loss")
        assert (s.samples_trained, s.samples_dropped_stale) == (0, 0)
        trainer.feed(b1)
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.durable_version == 2 and s.version == 3, "b1 and b2 trained")
        assert trainer.confirmed[0].batches[0].stale_ids == ["1-1"]
        assert (s.samples_trained, s.samples_dropped_stale) == (3, 1)
        await handle.terminate("test over")


async def test_a_full_disk_pauses_training_until_resumed(env: WorkflowEnvironment):
    """No room for a durable checkpoint (making room, or writing it): training pauses with the reason; its batches
    stay unacknowledged; after `resume` the checkpoint is tried again and confirmed."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.inject("start_checkpoint", ErrorType.DISK_FULL)
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        trainer.feed(b1)
        trainer.feed(b2)
        s = await until_status(handle, lambda s: s.paused, "training to pause itself")
        assert "no space" in (s.pause_reason or "") and s.version == 2
        assert trainer.checkpoints_started == [SaveCheckpointInput(version=2, since=0)]
        await asyncio.sleep(0.3)
        assert len(trainer.claims) == 2  # paused: nothing claimed
        assert trainer.acked == [] and trainer.confirmed == []  # the batches stay pending

        trainer.inject("finish_checkpoint", ErrorType.DISK_FULL)  # the disk fills while it is written, this time
        await handle.signal(TrainingWorkflow.resume)
        await eventually(lambda: len(trainer.claims) == 3, what="claiming to resume")
        assert trainer.claims[2].skip == skip_of(b1, b2)
        trainer.feed(batch())  # nothing new: the checkpoint is due all the same
        s = await until_status(handle, lambda s: s.paused, "training to pause again")
        assert "no space" in (s.pause_reason or "") and trainer.confirmed == []
        # the write failed beside the claim that followed its start: that claim's return finds training resumed
        await eventually(lambda: len(trainer.claims) == 4, what="the claim beside the write")

        await handle.signal(TrainingWorkflow.resume)
        trainer.feed(batch())
        await eventually(lambda: len(trainer.confirmed) == 1, what="the checkpoint to be written at last")
        assert trainer.checkpoints_started == [SaveCheckpointInput(version=2, since=0)] * 3
        assert trainer.confirmed[0].batches == [durable(b1, 1), durable(b2, 2)]
        s = await until_status(handle, lambda s: s.durable_version == 2, "the checkpoint to be confirmed")
        assert (s.paused, s.pause_reason) == (False, None)
        await handle.terminate("test over")


# ---- publishing from memory, durable checkpoints on a cadence --------------------------------------------------------


async def test_batches_are_acknowledged_only_once_a_durable_checkpoint_holds_them(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer) as own:
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.claims) == 2, what="the claim after version 1")
        assert trainer.steps == [step(b1, version=0)]
        assert trainer.versions_published == [from_memory(1)]  # from memory, at once
        assert trainer.claims[1].skip == skip_of(b1)  # pending, and never claimed again
        assert trainer.acked == [] and trainer.checkpoints_started == []
        assert (await status(handle)).versions_since_durable == 1

        trainer.feed(b2)
        await eventually(lambda: len(trainer.confirmed) == 1, what="the durable checkpoint of version 2")
        await eventually(lambda: len(trainer.claims) == 3, what="the claim beside it")
        assert trainer.checkpoints_started == [SaveCheckpointInput(version=2, since=0)]
        assert trainer.calls.index("start_checkpoint") > trainer.calls.index("publish_version", 5)  # after v2
        confirm = trainer.confirmed[0]
        assert (confirm.checkpoint.version, confirm.since) == (2, 0)
        assert confirm.batches == [durable(b1, 1), durable(b2, 2)]  # exactly versions 1-2: acknowledged now
        assert trainer.acked == []  # no batch acknowledged any other way
        assert trainer.claims[2].skip == skip_of(b1, b2)  # claimed while it was written
        s = await until_status(handle, lambda s: s.durable_version == 2, "the confirmation to be taken in")
        assert (s.versions_since_durable, s.last_checkpoint.version, s.trainer_lost) == (0, 2, 0)

        trainer.feed(b3)
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after version 3")
        assert trainer.claims[3].skip == skip_of(b3)  # the confirmed ones are done with
        assert trainer.steps[-1] == step(b3, version=2, durable=2)
        assert trainer.versions_published[-1] == from_memory(3, durable=2)

        # every call about the trainer went to its worker's own queue, given up on after a minute of silence
        assert {name for name, queue in trainer.queues if queue == own} == TRAINER_CALLS
        assert {name for name, queue in trainer.queues if queue == q} == {"find_resume_point", "claim_batch"}
        history = await handle.fetch_history()
        to_start = {
            (a.activity_type.name, a.task_queue.name, a.schedule_to_start_timeout.ToSeconds())
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            for a in [e.activity_task_scheduled_event_attributes]
            if a.activity_type.name in TRAINER_CALLS
        }
        assert to_start == {(name, own, 60) for name in TRAINER_CALLS}
        await handle.terminate("test over")


async def test_every_version_really_is_every_version_and_a_pause_still_takes_a_due_checkpoint(
    env: WorkflowEnvironment,
):
    """A checkpoint due while the previous one is still being written waits for it (the cadence is kept: a version
    it skipped would never be on disk), and a version trained just before a pause on request still gets its own."""
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=1)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.hold("finish_checkpoint")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.checkpoints_started) == 1, what="the checkpoint of version 1")
        trainer.feed(b2)
        await until_status(handle, lambda s: s.version == 2, "version 2")
        await asyncio.sleep(0.5)
        assert len(trainer.claims) == 2  # version 2's checkpoint waits for version 1's write: no further claim
        trainer.release("finish_checkpoint")
        await eventually(lambda: len(trainer.confirmed) == 2, what="both checkpoints")
        assert [c.version for c in trainer.checkpoints_started] == [1, 2]
        await handle.signal(TrainingWorkflow.pause)
        trainer.feed(b3)  # the claim under way when the pause came: its step runs, then the loop waits
        s = await until_status(handle, lambda s: s.version == 3 and s.durable_version == 3, "version 3 durable")
        assert s.paused and [c.version for c in trainer.checkpoints_started] == [1, 2, 3]
        await handle.terminate("test over")


async def test_the_time_cadence_starts_a_durable_checkpoint(skipping_env: WorkflowEnvironment):
    env, q = skipping_env, new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_s=600)  # and every 20 versions: never, here
        b1 = batch("1-0", "1-1")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.claims) == 2, what="the claim after version 1")
        trainer.feed(batch())
        await eventually(lambda: len(trainer.claims) == 3, what="an empty claim")
        assert trainer.checkpoints_started == []  # not due yet

        # Time skips only while nothing is in flight: paused, the workflow waits on a condition alone.
        await handle.signal(TrainingWorkflow.pause)
        trainer.feed(batch(backlog=5))
        await until_status(handle, lambda s: s.paused and s.backlog == 5, "the paused workflow to wait")
        await env.sleep(timedelta(seconds=601))
        await handle.signal(TrainingWorkflow.resume)
        await eventually(lambda: len(trainer.claims) == 4, what="claiming to resume")
        assert trainer.checkpoints_started == []  # checked after a claim, not while paused
        trainer.feed(batch())
        await eventually(lambda: len(trainer.confirmed) == 1, what="the checkpoint the clock made due")
        assert trainer.checkpoints_started == [SaveCheckpointInput(version=1, since=0)]
        assert trainer.confirmed[0].batches == [durable(b1, 1)]
        await until_status(handle, lambda s: s.durable_version == 1, "the confirmation to be taken in")
        await handle.terminate("test over")


async def test_a_trainer_lost_at_a_step_goes_back_to_the_durable_checkpoint(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3, b4 = (batch(f"{n}-0", f"{n}-1") for n in (1, 2, 3, 4))
        for b in (b1, b2):
            trainer.feed(b)
        await until_status(handle, lambda s: s.durable_version == 2, "the durable checkpoint of version 2")
        trainer.feed(b3)
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after version 3")
        assert trainer.claims[3].skip == skip_of(b3)
        assert trainer.count("find_resume_point") == 1

        trainer.inject("train_step", ErrorType.TRAINER_LOST)  # the worker restarted: version 3 is gone
        trainer.feed(b4)
        await eventually(lambda: len(trainer.claims) == 5, what="the claim after the loss")
        assert trainer.steps[3] == step(b4, version=3, durable=2)
        assert trainer.count("find_resume_point") == 2  # attached again
        assert trainer.claims[4].skip == {}  # b3 (version 3, lost) is claimed again
        s = await status(handle)
        assert (s.trainer_lost, s.version, s.durable_version, s.steps) == (1, 3, 2, 3)

        trainer.feed(b3)  # as Redis hands the pending entries back first
        await eventually(lambda: len(trainer.claims) == 6, what="the step after the loss")
        assert trainer.steps[4] == step(b3, version=3, durable=2, from_durable=True)  # labelled 3, numbers grow
        assert trainer.versions_published[-1] == from_memory(4, durable=2)
        assert trainer.claims[5].skip == skip_of(b3)
        # versions 3 (lost) and 4 since the durable checkpoint: the next one is due already
        await until_status(handle, lambda s: s.durable_version == 4, "the next durable checkpoint")
        assert trainer.confirmed[1].since == 2 and trainer.confirmed[1].batches == [durable(b3, 4)]
        trainer.feed(b4)
        await eventually(lambda: len(trainer.claims) == 7, what="b4 trained again")
        assert trainer.steps[5] == step(b4, version=4, durable=4)  # back to in memory
        s = await status(handle)
        assert (s.trainer_lost, s.version, s.durable_version, s.steps, s.samples_trained) == (1, 5, 4, 5, 8)
        await handle.terminate("test over")


async def test_after_a_loss_an_all_stale_batch_serves_the_durable_checkpoint_as_a_new_version(env: WorkflowEnvironment):
    """After a restart the servers may serve a version too old for any of their samples to be trained on: a stale
    batch must not leave training stuck. Nothing is published while nobody holds the current version; the trainer
    takes the durable checkpoint again as a new version, which the servers get."""
    q = new_queue()
    b1, b2, b3 = (batch(f"{n}-0", f"{n}-1") for n in (1, 2, 3))
    trainer = TrainerActivities(stale={*b2.ids["test"]})
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=5)
        trainer.feed(b1)
        await until_status(handle, lambda s: s.version == 1, "version 1")
        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b3)
        await until_status(handle, lambda s: s.trainer_lost == 1, "the loss")
        published = len(trainer.versions_published)
        await handle.signal(TrainingWorkflow.republish)  # nobody holds version 1 now: nothing to publish
        trainer.feed(b2)  # all stale
        await until_status(handle, lambda s: s.version == 2, "the durable checkpoint as version 2")
        assert trainer.steps[-1] == step(b2, version=1, durable=0, from_durable=True)
        # version 1 is never published again (nobody holds it); version 2 is (the signal may ask for it once more)
        assert set(map(str, trainer.versions_published[published:])) == {str(from_memory(2, durable=0))}
        # The stale batch is acknowledged and counted once the new version is out: wait for both, not one query.
        await eventually(lambda: bool(trainer.acked) and trainer.acked[-1].ids == b2.ids, what="b2 acknowledged")
        await until_status(handle, lambda s: s.samples_dropped_stale == 2, "b2 counted as stale")
        steps = len(trainer.steps)
        trainer.feed(b1)  # trained again, from version 2, in memory
        await eventually(lambda: len(trainer.steps) > steps, what="the step after")
        assert trainer.steps[-1] == step(b1, version=2, durable=0)
        await handle.terminate("test over")


async def test_a_trainer_lost_at_publishing_goes_back_and_spends_the_version_number(env: WorkflowEnvironment):
    """The publication may have reached some servers before the trainer went: the version trained again must not
    reuse that number (servers serving it would skip it)."""
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q)
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.claims) == 2, what="version 1")
        trainer.inject("publish_version", ErrorType.TRAINER_LOST)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 3, what="the claim after the loss")
        assert trainer.versions_published == [from_memory(1), from_memory(2)]
        assert trainer.count("find_resume_point") == 2 and trainer.claims[2].skip == {}
        s = await status(handle)
        assert (s.trainer_lost, s.version, s.durable_version, s.steps) == (1, 2, 0, 1)

        trainer.feed(b1)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 5, what="both batches trained again")
        assert trainer.steps[2:] == [
            step(b1, version=2, from_durable=True),  # the base model (durable 0), labelled 2
            step(b2, version=3),
        ]
        assert trainer.versions_published[2:] == [from_memory(3), from_memory(4)]
        assert trainer.claims[4].skip == skip_of(b1, b2)
        await handle.terminate("test over")


async def test_a_loss_while_a_checkpoint_is_written_leaves_it_unconfirmed(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("finish_checkpoint")
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.checkpoints_finished) == 1, what="the checkpoint of version 2")
        await eventually(lambda: len(trainer.claims) == 3, what="the step beside it")
        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b3)
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after the loss")
        assert trainer.claims[3].skip == {}

        trainer.release("finish_checkpoint")  # written after all, but by a trainer that lost what it held since
        await eventually(lambda: activity_completed(handle, "finish_checkpoint"), what="the write to end")
        trainer.feed(b1)
        await until_status(handle, lambda s: s.durable_version == 3, "the next durable checkpoint")
        assert trainer.steps[3] == step(b1, version=2, from_durable=True)
        assert trainer.checkpoints_started == [
            SaveCheckpointInput(version=2, since=0),
            SaveCheckpointInput(version=3, since=0),
        ]
        assert trainer.confirmed_versions() == [3]  # version 2's checkpoint never confirmed
        assert trainer.confirmed[0].batches == [durable(b1, 3)]
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 6, what="b2 trained again")
        assert trainer.steps[4] == step(b2, version=3, durable=3)
        s = await status(handle)
        assert (s.trainer_lost, s.durable_version, s.version) == (1, 3, 4)
        await handle.terminate("test over")


async def test_a_loss_while_a_checkpoint_is_confirmed_waits_for_it(env: WorkflowEnvironment):
    """Confirming records the batches as trained and acknowledges them: a loss meanwhile must neither claim them
    again nor go back past the checkpoint being confirmed."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("confirm_checkpoint")
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.confirmed) == 1, what="the confirmation of version 2")
        await eventually(lambda: len(trainer.claims) == 3, what="the claim beside it")
        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b3)
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after the loss")
        assert trainer.claims[3].skip == skip_of(b1, b2)  # being confirmed: not to be claimed again

        trainer.feed(b3)
        await asyncio.sleep(0.5)
        assert len(trainer.steps) == 3  # the step from the durable checkpoint waits for the confirmation
        trainer.release("confirm_checkpoint")
        await eventually(lambda: len(trainer.steps) == 4, what="the step after the confirmation")
        assert trainer.steps[3] == step(b3, version=2, durable=2, from_durable=True)
        await eventually(lambda: len(trainer.claims) == 5, what="the claim after it")
        s = await status(handle)
        assert (s.trainer_lost, s.durable_version) == (1, 2)
        assert s.samples_trained == 6  # b1, b2 (confirmed) and b3, each once
        await handle.terminate("test over")


async def test_a_confirmation_that_fails_after_a_loss_leaves_its_batches_to_be_trained_again(
    env: WorkflowEnvironment,
):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("confirm_checkpoint")
    trainer.inject("confirm_checkpoint", ErrorType.TRAINER_LOST)  # its worker went too
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.confirmed) == 1, what="the confirmation of version 2")
        await eventually(lambda: len(trainer.claims) == 3, what="the claim beside it")
        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b3)
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after the loss")
        assert trainer.claims[3].skip == skip_of(b1, b2)
        trainer.feed(b3)
        trainer.release("confirm_checkpoint")
        await eventually(lambda: len(trainer.claims) == 5, what="the step after the failed confirmation")
        assert trainer.steps[3] == step(b3, version=2, from_durable=True)  # version 2 never became durable
        assert trainer.claims[4].skip == skip_of(b3)  # b1 and b2 are claimed again
        await until_status(handle, lambda s: s.durable_version == 3, "the checkpoint of version 3")
        assert trainer.confirmed[1].batches == [durable(b3, 3)]
        for b in (b1, b2):
            trainer.feed(b)
        await eventually(lambda: len(trainer.steps) == 6, what="b1 and b2 trained again")
        assert trainer.steps[4:] == [step(b1, version=3, durable=3), step(b2, version=4, durable=3)]
        s = await until_status(handle, lambda s: s.version == 5, "version 5")
        assert (s.trainer_lost, s.samples_trained) == (1, 6)  # b1, b2, b3, each once
        await handle.terminate("test over")


async def test_a_checkpoint_confirmed_by_a_trainer_lost_before_it_answered_is_gone_back_to(env: WorkflowEnvironment):
    """The trainer recorded version 2's batches as trained, marked it confirmed and died before Temporal heard of
    it: training goes on from version 2, its batches counted once and never trained again (seen in the chaos test:
    the count had dropped them while trained.jsonl held them)."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("confirm_checkpoint")
    trainer.inject("confirm_checkpoint", ErrorType.TRAINER_LOST)  # its answer is lost with its worker
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1")
        trainer.feed(b1)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.confirmed) == 1, what="the confirmation of version 2")
        await eventually(lambda: len(trainer.claims) == 3, what="the claim beside it")
        trainer.resume_version = 2  # ...but it reached the disk
        trainer.release("confirm_checkpoint")
        s = await until_status(handle, lambda s: s.trainer_lost == 1, "the loss")
        assert (s.samples_trained, s.durable_version) == (0, 0)  # until the next trainer says what the disk holds

        trainer.feed(batch("1-1", "3-0"))  # an entry of version 2 the dead trainer never acknowledged comes back
        await eventually(lambda: len(trainer.steps) == 3, what="the step after the loss")
        assert trainer.confirmed[1].checkpoint.version == 2 and trainer.confirmed[1].since == 0
        assert trainer.confirmed[1].batches == [durable(b1, 1), durable(b2, 2)]  # recorded once, acknowledged
        assert trainer.steps[2] == step(batch("3-0"), version=2, durable=2, from_durable=True)
        s = await until_status(handle, lambda s: s.version == 3, "version 3")
        assert (s.durable_version, s.samples_trained) == (2, 5)  # b1, b2 and 3-0, each once
        await eventually(lambda: len(trainer.claims) == 4, what="the claim after the step")
        assert trainer.claims[3].skip == skip_of(batch("3-0"))
        trainer.feed(b3)  # 3-1 is trained on the version from version 2 too
        await eventually(lambda: len(trainer.steps) == 4, what="the next step")
        assert trainer.steps[3] == step(b3, version=3, durable=2)
        await handle.terminate("test over")


@pytest.mark.parametrize("on_disk", [2, 9], ids=["the-durable-one", "not-of-this-chain"])
async def test_after_a_loss_only_a_newer_confirmed_checkpoint_of_this_chain_is_gone_back_to(
    env: WorkflowEnvironment, on_disk: int
):
    """Version 3 is lost with its trainer. The disk's newest confirmed checkpoint is the workflow's own durable one
    (2), or one newer than any version this workflow made (9: another chain's): neither is adopted, version 3's
    batch is trained again from version 2 and stays in the claim."""
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2)
        b1, b2, b3, b4 = batch("1-0", "1-1"), batch("2-0", "2-1"), batch("3-0", "3-1"), batch("4-0", "4-1")
        for b in (b1, b2, b3):
            trainer.feed(b)
        await until_status(handle, lambda s: (s.version, s.durable_version) == (3, 2), "version 3 beside durable 2")
        trainer.resume_version = on_disk
        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b4)
        s = await until_status(handle, lambda s: s.trainer_lost == 1, "the loss")
        assert s.samples_trained == 4  # b3 taken off
        trainer.feed(batch("3-0", "3-1"))
        await eventually(lambda: len(trainer.steps) == 5, what="the step after the loss")
        assert trainer.steps[4] == step(b3, version=3, durable=2, from_durable=True)
        # Nothing adopted: the next confirmation is version 4's own (due 2 versions after 2), holding b3 trained again.
        s = await until_status(handle, lambda s: s.durable_version == 4, "the checkpoint of version 4")
        assert trainer.confirmed_versions() == [2, 4] and trainer.confirmed[1].batches == [durable(b3, 4)]
        assert s.samples_trained == 6
        await handle.terminate("test over")


@workflow.defn(name=TRAINING_WORKFLOW, sandboxed=False)
class TrainingWorkflowQuickToLose(TrainingWorkflow):
    """TrainingWorkflow with a trainer queue given up on after 2 s of silence instead of 60: schedule-to-start
    timeouts run in real time even on the time-skipping server (the 60 s of the real one are asserted in
    test_batches_are_acknowledged_only_once_a_durable_checkpoint_holds_them)."""

    @workflow.run
    async def run(self, inp: TrainingInput):
        return await super().run(inp)

    async def _on_trainer(self, defn, arg, **timeouts):
        return await execute(
            defn,
            arg,
            task_queue=self.state.trainer_queue or self.config.trainer_task_queue,
            heartbeat=timedelta(seconds=self.config.heartbeat_timeout_s),
            schedule_to_start=timedelta(seconds=2),
            **timeouts,
        )


async def test_a_silent_trainer_queue_is_a_lost_trainer(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer, workflows=(TrainingWorkflowQuickToLose,)) as own:
        first = f"{q}-first"
        trainer.trainer_queues = [first]  # the first look-up finds a worker that then goes away
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        async with Worker(env.client, task_queue=first, activities=trainer.all()):
            handle = await start_training(env, q)
            trainer.feed(b1)
            await eventually(lambda: len(trainer.claims) == 2, what="version 1 on the first worker")
            assert ("train_step", first) in trainer.queues and ("publish_version", first) in trainer.queues
        # that worker is gone: nothing polls its queue
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 3, timeout=15, what="the claim after the silence")
        assert len(trainer.steps) == 1  # the step was never picked up
        assert trainer.count("find_resume_point") == 2 and trainer.claims[2].skip == {}
        s = await status(handle)
        assert (s.trainer_lost, s.version) == (1, 1)

        trainer.feed(b1)
        await eventually(lambda: len(trainer.claims) == 4, what="the step on the next worker")
        assert trainer.steps[1] == step(b1, version=1, from_durable=True)
        assert trainer.queues[-3:-1] == [("train_step", own), ("publish_version", own)]
        history = await handle.fetch_history()
        timed_out = [e for e in history.events if e.HasField("activity_task_timed_out_event_attributes")]
        assert len(timed_out) == 1
        await handle.terminate("test over")


async def test_continue_as_new_waits_for_a_checkpoint_and_carries_the_undurable_batches(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("finish_checkpoint")
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, checkpoint_every_versions=2, steps_per_run=3)
        run_id = (await handle.describe()).run_id
        b1, b2, b3, b4 = (batch(f"{n}-0", f"{n}-1") for n in (1, 2, 3, 4))
        for b in (b1, b2, b3):
            trainer.feed(b)
        await eventually(lambda: len(trainer.versions_published) == 3, what="three steps")
        await asyncio.sleep(0.5)
        assert len(trainer.claims) == 3 and trainer.confirmed == []  # waiting for the checkpoint of version 2
        assert (await handle.describe()).run_id == run_id

        trainer.release("finish_checkpoint")
        await next_run(handle, run_id)
        await eventually(lambda: len(trainer.claims) == 4, what="the next run's first claim")
        assert trainer.confirmed_versions() == [2] and trainer.confirmed[0].batches == [durable(b1, 1), durable(b2, 2)]
        assert trainer.claims[3].skip == skip_of(b3)  # version 3 still waits for a durable checkpoint
        assert trainer.count("find_resume_point") == 1  # the trainer's queue carried over
        s = await status(handle)
        assert (s.version, s.durable_version, s.versions_since_durable, s.steps) == (3, 2, 1, 3)

        trainer.feed(b4)
        await eventually(lambda: len(trainer.confirmed) == 2, what="the next run's checkpoint")
        assert trainer.confirmed[1].since == 2 and trainer.confirmed[1].batches == [durable(b3, 3), durable(b4, 4)]
        await handle.terminate("test over")


async def test_a_run_continued_from_one_that_checkpointed_every_version_goes_back_to_its_checkpoint(
    env: WorkflowEnvironment,
):
    """The state an older run (a checkpoint at every version, no marker) continues as new with: its version is on
    disk, so a loss goes back to it, not to the base model."""
    q = new_queue()
    trainer = TrainerActivities()
    async with trainer_workers(env, q, trainer):
        old = TrainingState(version=5, checkpoint="/ckpt/policy-5", steps=5, samples_trained=10)
        handle = await start_training(env, q, training_input(q).model_copy(update={"state": old}))
        b1, b2 = batch("1-0", "1-1"), batch("2-0", "2-1")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.claims) == 2, what="version 6")
        assert trainer.steps == [step(b1, version=5, durable=5)]
        s = await status(handle)
        assert (s.version, s.durable_version, s.versions_since_durable) == (6, 5, 1)

        trainer.inject("train_step", ErrorType.TRAINER_LOST)
        trainer.feed(b2)
        await eventually(lambda: len(trainer.claims) == 3, what="the claim after the loss")
        trainer.feed(b1)
        await eventually(lambda: len(trainer.steps) == 3, what="the step after the loss")
        assert trainer.steps[2] == step(b1, version=6, durable=5, from_durable=True)
        await handle.terminate("test over")


async def test_a_republish_asked_for_just_before_continuing_as_new_is_not_lost(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.hold("train_step")
    async with trainer_workers(env, q, trainer):
        handle = await start_training(env, q, steps_per_run=1)
        run_id = (await handle.describe()).run_id
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.steps) == 1, what="the step")
        await handle.signal(TrainingWorkflow.republish)  # arrives during the run's last step
        trainer.release("train_step")
        await next_run(handle, run_id)
        await eventually(lambda: len(trainer.claims) == 2, what="the next run's first claim")
        assert trainer.versions_published == [from_memory(1)] * 2
        assert trainer.calls[-2:] == ["publish_version", "claim_batch"]
        await handle.terminate("test over")
