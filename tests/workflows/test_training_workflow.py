"""TrainingWorkflow against the time-skipping test server, with mock trainer activities."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from contracts.errors import ErrorType
from contracts.training import AckInput, PublishWeightsInput, training_workflow_id
from tests.workflows.mocks import TrainerActivities, batch, eventually, new_queue, training_input
from workflows.training import TrainingWorkflow

pytestmark = pytest.mark.timeout(60)  # a server that stopped skipping time would otherwise wait out the 600 s default


async def start_training(env: WorkflowEnvironment, queue: str) -> WorkflowHandle:
    return await env.client.start_workflow(
        TrainingWorkflow.run, training_input(queue), id=training_workflow_id(f"test-{uuid.uuid4()}"), task_queue=queue
    )


async def test_all_stale_batch_is_acknowledged_without_a_new_version(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities(stale={"1-0", "1-1"})
    async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1", backlog=4))
        await eventually(lambda: len(trainer.acked) == 1, what="the stale batch to be acknowledged")
        assert trainer.acked == [AckInput(ids={"test": ["1-0", "1-1"]})]
        assert trainer.published == []
        assert trainer.calls[:3] == ["claim_batch", "train_step", "ack_batch"]
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.steps, status.samples_trained, status.samples_dropped_stale) == (0, 0, 0, 2)
        assert status.backlog == 4 and status.recent_losses == []

        trainer.feed(batch("2-0", "2-1"))
        await eventually(lambda: len(trainer.acked) == 2, what="the next batch to be trained")
        assert trainer.steps[1].version == 0  # trained from the same version: the stale batch made none
        assert trainer.published == [PublishWeightsInput(checkpoint="/ckpt/policy-1", version=1)]
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.steps, status.samples_trained, status.samples_dropped_stale) == (1, 1, 2, 2)
        await handle.terminate("test over")


async def test_pause_stops_claiming_until_resumed(skipping_env: WorkflowEnvironment):
    env, q = skipping_env, new_queue()
    trainer = TrainerActivities()
    async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.claims) == 2, what="the claim after the first step")
        assert trainer.calls == ["claim_batch", "train_step", "publish_weights", "ack_batch", "claim_batch"]
        assert (await handle.query(TrainingWorkflow.status)).version == 1

        await handle.signal(TrainingWorkflow.pause)
        trainer.feed(batch("2-0", backlog=7))  # the claim in flight returns short of a batch; the loop then waits

        async def short_claim_seen() -> bool:
            status = await handle.query(TrainingWorkflow.status)
            return status.paused and status.backlog == 7 and status.waiting_samples == 1

        await eventually(short_claim_seen, what="the short claim to be processed")
        await env.sleep(timedelta(hours=2))
        await asyncio.sleep(0.3)
        assert len(trainer.claims) == 2

        await handle.signal(TrainingWorkflow.resume)
        await eventually(lambda: len(trainer.claims) == 3, what="claiming to resume")
        trainer.feed(batch("2-0", "3-0"))
        await eventually(lambda: len(trainer.acked) == 2, what="the step after resuming")
        assert trainer.calls[5:9] == ["claim_batch", "train_step", "publish_weights", "ack_batch"]
        assert trainer.steps[1].version == 1
        assert trainer.published[1] == PublishWeightsInput(checkpoint="/ckpt/policy-2", version=2)
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.steps, status.samples_trained, status.paused) == (2, 2, 4, False)
        assert status.recent_losses == [0.5, 0.25]
        await handle.terminate("test over")


async def test_a_fresh_start_resumes_from_the_newest_checkpoint_and_serves_it(env: WorkflowEnvironment):
    """A terminated or failed TrainingWorkflow started again must not train version 1 over policy-1 again."""
    q = new_queue()
    trainer = TrainerActivities()
    trainer.resume_version = 7
    async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
        inp = training_input(q).model_copy(update={"resume": True})
        handle = await env.client.start_workflow(
            TrainingWorkflow.run, inp, id=training_workflow_id(f"test-{uuid.uuid4()}"), task_queue=q
        )
        await eventually(lambda: len(trainer.claims) == 1, what="the first claim")
        assert trainer.calls[:2] == ["find_resume_point", "publish_weights"]  # the servers load v7 before anything
        assert trainer.published == [PublishWeightsInput(checkpoint="/ckpt/policy-7", version=7)]
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.acked) == 1, what="the first step")
        assert trainer.steps[0].version == 7 and trainer.published[-1].version == 8
        await handle.terminate("test over")


async def test_an_all_stale_batch_after_a_version_has_the_servers_load_it_again(env: WorkflowEnvironment):
    """Every sample stale means the servers generate with older weights (an engine restarted on the base model)."""
    q = new_queue()
    trainer = TrainerActivities(stale={"2-0", "2-1"})
    async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
        handle = await start_training(env, q)
        trainer.feed(batch("1-0", "1-1"))
        await eventually(lambda: len(trainer.acked) == 1, what="the first step")
        trainer.feed(batch("2-0", "2-1"))
        await eventually(lambda: len(trainer.acked) == 2, what="the stale batch")
        assert trainer.published == [PublishWeightsInput(checkpoint="/ckpt/policy-1", version=1)] * 2
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.samples_dropped_stale) == (1, 2)
        await handle.terminate("test over")


async def test_a_non_finite_update_drops_its_batch_and_a_full_disk_pauses_training(env: WorkflowEnvironment):
    q = new_queue()
    trainer = TrainerActivities()
    trainer.fail_with = {"nan-0": ErrorType.NON_FINITE_UPDATE, "full-0": ErrorType.DISK_FULL}
    async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
        handle = await start_training(env, q)
        trainer.feed(batch("nan-0", "nan-1"))
        await eventually(lambda: len(trainer.acked) == 1, what="the poisoned batch to be acknowledged")
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.samples_dropped_bad, status.paused) == (0, 2, False)
        assert trainer.published == []  # nothing of a non-finite step is ever served

        trainer.feed(batch("full-0", "full-1"))
        await eventually(lambda: len(trainer.steps) == 2, what="the step that hits a full disk")

        async def paused() -> bool:
            return (await handle.query(TrainingWorkflow.status)).paused

        await eventually(paused, what="training to pause itself")
        status = await handle.query(TrainingWorkflow.status)
        assert "no space" in (status.pause_reason or "") and len(trainer.acked) == 1  # the batch stays claimed
        trainer.fail_with = {}
        await handle.signal(TrainingWorkflow.resume)
        trainer.feed(batch("full-0", "full-1"))  # as Redis hands the pending entries back first
        await eventually(lambda: len(trainer.acked) == 2, what="the batch to be trained after resume")
        status = await handle.query(TrainingWorkflow.status)
        assert (status.version, status.paused, status.pause_reason) == (1, False, None)
        await handle.terminate("test over")
