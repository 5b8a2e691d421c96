"""control.deployments against a real Temporal dev server: builds made current, and (one box) what was pinned to a
build whose worker is gone moves to the current build instead of waiting forever."""

from __future__ import annotations

import asyncio
import uuid

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.worker import Worker, WorkerDeploymentConfig, WorkerDeploymentVersion

from bench.dev_server import start_dev_server
from control.deployments import describe, make_current, make_current_if_none, release_pinned_elsewhere
from openclaw_rl.settings import Settings


@workflow.defn(name="WaitsForGo", sandboxed=False)
class WaitsOnA:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        return "finished on a"


@workflow.defn(name="WaitsForGo", sandboxed=False)
class WaitsOnB(WaitsOnA):
    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        return "finished on b"


def versioned(client, queue: str, build: str, wf: type) -> Worker:
    config = WorkerDeploymentConfig(
        version=WorkerDeploymentVersion("test-deployment", build),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )
    return Worker(client, task_queue=queue, workflows=[wf], deployment_config=config)


async def test_a_restart_on_a_new_build_moves_what_was_pinned_to_the_old_one():
    env = await start_dev_server()
    settings = Settings(temporal={"versioning": {"enabled": True, "deployment_name": "test-deployment"}})
    queue = f"q-{uuid.uuid4().hex[:6]}"
    try:
        client = env.client
        async with versioned(client, queue, "a", WaitsOnA):
            await make_current(client, settings, "a")
            handle = await client.start_workflow(WaitsOnA.run, id=f"waits-{queue}", task_queue=queue)
            await asyncio.sleep(1.0)  # its first workflow task ran on a: pinned there
        assert await release_pinned_elsewhere(client, settings, "a") == 0  # nothing pinned elsewhere than a

        async with versioned(client, queue, "b", WaitsOnB):  # a's worker is gone, as after a restart with new code
            await make_current(client, settings, "b")
            state = await describe(client, settings)
            assert state is not None and state.current == "b" and {b.build_id for b in state.builds} == {"a", "b"}
            assert await release_pinned_elsewhere(client, settings, "b") == 1
            await handle.signal(WaitsOnA.proceed)
            assert await asyncio.wait_for(handle.result(), 30) == "finished on b"
    finally:
        await env.shutdown()


async def test_a_fleets_first_build_makes_itself_current_and_a_later_one_waits_to_be_promoted():
    """Without `make_current_on_start` (a cluster): nothing current means new workflows wait for a worker that never
    polls unversioned, so the first build routes to itself; the second does not take over running traffic."""
    env = await start_dev_server()
    settings = Settings(temporal={"versioning": {"enabled": True, "deployment_name": f"fleet-{uuid.uuid4().hex[:6]}"}})
    queue = f"q-{uuid.uuid4().hex[:6]}"
    try:
        client = env.client
        name = settings.temporal.versioning.deployment_name

        def build(build_id: str, wf: type) -> Worker:
            config = WorkerDeploymentConfig(
                version=WorkerDeploymentVersion(name, build_id),
                use_worker_versioning=True,
                default_versioning_behavior=VersioningBehavior.PINNED,
            )
            return Worker(client, task_queue=queue, workflows=[wf], deployment_config=config)

        async with build("a", WaitsOnA), build("b", WaitsOnB):
            assert await make_current_if_none(client, settings, "a")
            assert not await make_current_if_none(client, settings, "b")
            state = await describe(client, settings)
            assert state is not None and state.current == "a", state
            handle = await client.start_workflow(WaitsOnA.run, id=f"first-{queue}", task_queue=queue)
            await handle.signal(WaitsOnA.proceed)
            assert await asyncio.wait_for(handle.result(), 30) == "finished on a"
    finally:
        await env.shutdown()
