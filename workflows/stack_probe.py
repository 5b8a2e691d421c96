"""StackProbeWorkflow: proves that every worker pool is polling its task queue.

`openclaw-rl up` runs it before it reports the stack as up; it is also a cheap,
durable end-to-end check (optionally waiting on a durable timer first).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.health import PingInput, PoolPong

PING_TIMEOUT = timedelta(seconds=30)
PING_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=2), maximum_attempts=20)


class ProbeInput(BaseModel):
    task_queues: dict[str, str]
    """Pool name -> its task queue."""
    delay_s: float = Field(0.0, ge=0)
    """Durable timer before pinging (exercises persistence across server restarts)."""


class ProbeResult(BaseModel):
    pongs: list[PoolPong]


@workflow.defn
class StackProbeWorkflow:
    @workflow.run
    async def run(self, inp: ProbeInput) -> ProbeResult:
        if inp.delay_s:
            await workflow.sleep(timedelta(seconds=inp.delay_s))
        pongs = []
        for pool, queue in sorted(inp.task_queues.items()):
            pong = await workflow.execute_activity(
                "ping",
                PingInput(pool=pool),
                task_queue=queue,
                schedule_to_close_timeout=PING_TIMEOUT,
                retry_policy=PING_RETRY,
                result_type=PoolPong,
            )
            pongs.append(pong)
        return ProbeResult(pongs=pongs)
