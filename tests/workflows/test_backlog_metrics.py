"""The pools' scaling signal (workers.backlog): a task queue's backlog read from a real dev server and served on the
pool's Prometheus endpoint, growing while no worker polls the queue and draining to 0 once one does.

On a dev server: the time-skipping test server has no DescribeTaskQueue stats. Its approximate counts lag a few
seconds behind the queue, so every check waits with a deadline.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import timedelta

import httpx
import pytest
import pytest_asyncio
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from openclaw_rl.ports import free_port
from openclaw_rl.temporal_client import metrics_runtime
from stack.preflight import find_temporal_binary
from workers.backlog import BacklogPoller

pytestmark = pytest.mark.timeout(180)

ACTIVITIES = 4


@activity.defn
async def work(n: int) -> int:
    return n


@workflow.defn
class FanOut:
    @workflow.run
    async def run(self, queue: str) -> int:
        done = await asyncio.gather(
            *(
                workflow.execute_activity(work, n, task_queue=queue, start_to_close_timeout=timedelta(seconds=30))
                for n in range(ACTIVITIES)
            )
        )
        return sum(done)


@pytest_asyncio.fixture(scope="module")
async def dev():
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(find_temporal_binary()))
    try:
        yield env
    finally:
        await env.shutdown()


def gauges(text: str, name: str) -> dict[tuple[str, str, str], float]:
    """{(pool, queue, task_type): value} of one gauge in a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        out[(labels.get("pool"), labels.get("queue"), labels.get("task_type"))] = float(line.rsplit(" ", 1)[1])
    return out


async def until(what: str, check, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.5)


@pytest.mark.asyncio
async def test_the_backlog_of_a_queue_nobody_polls_is_served_on_the_pools_metrics_and_drains_once_a_worker_polls(dev):
    address = f"127.0.0.1:{free_port()}"
    runtime = metrics_runtime(address, "env")
    client = await Client.connect(dev.client.service_client.config.target_host, runtime=runtime)
    wf_queue, act_queue = f"wf-{uuid.uuid4().hex[:8]}", f"act-{uuid.uuid4().hex[:8]}"
    poller = BacklogPoller(client, runtime.metric_meter, [wf_queue, act_queue], interval_s=0.5)

    async def scrape(name: str = "openclaw_task_queue_backlog") -> dict:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://{address}/metrics", timeout=10)
        r.raise_for_status()
        return gauges(r.text, name)

    async with poller.running():
        handles = [
            await client.start_workflow(FanOut.run, act_queue, id=f"fan-{uuid.uuid4().hex[:8]}", task_queue=wf_queue)
            for _ in range(3)
        ]

        async def workflow_backlog():
            g = await scrape()
            return g.get(("env", wf_queue, "workflow"), 0) > 0 and g

        g = await until("a workflow task backlog", workflow_backlog)
        assert g.get(("env", act_queue, "activity"), 0) == 0  # nothing scheduled there yet
        assert (await scrape("openclaw_task_queue_backlog_stale"))[("env", wf_queue, "workflow")] == 0

        # the workflows run and schedule their activities on a queue no worker polls
        async with Worker(client, task_queue=wf_queue, workflows=[FanOut], workflow_runner=UnsandboxedWorkflowRunner()):

            async def activity_backlog():
                g = await scrape()
                return g.get(("env", wf_queue, "workflow"), 1) == 0 and g.get(("env", act_queue, "activity"), 0) > 0

            await until("the workflow backlog drained and an activity backlog", activity_backlog)
            age = await scrape("openclaw_task_queue_backlog_age_seconds")
            assert age[("env", act_queue, "activity")] > 0

            async with Worker(client, task_queue=act_queue, activities=[work]):
                assert [await h.result() for h in handles] == [sum(range(ACTIVITIES))] * 3

                async def drained():
                    g = await scrape()
                    return g.get(("env", act_queue, "activity"), 1) == 0

                await until("the activity backlog drained", drained)


@pytest.mark.asyncio
async def test_a_failed_read_keeps_the_last_value_marked_stale_and_the_poller_goes_on(dev):
    address = f"127.0.0.1:{free_port()}"
    runtime = metrics_runtime(address, "judge")
    client = await Client.connect(dev.client.service_client.config.target_host, runtime=runtime)
    poller = BacklogPoller(client, runtime.metric_meter, ["q"], interval_s=0.1)
    await poller.poll_once()
    assert not poller.last[("q", "activity")].stale
    poller.last[("q", "activity")].count = 7

    async def failing(queue: str, task_type: str):
        raise RuntimeError("frontend unavailable")

    poller.read = failing
    async with poller.running():
        await asyncio.sleep(0.3)  # a few failed reads: the task keeps running
    last = poller.last[("q", "activity")]
    assert last.stale and last.count == 7
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://{address}/metrics", timeout=10)).text
    assert gauges(text, "openclaw_task_queue_backlog_stale")[("judge", "q", "activity")] == 1
    assert gauges(text, "openclaw_task_queue_backlog")[("judge", "q", "activity")] == 7  # the last value, kept
