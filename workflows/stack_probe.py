"""StackProbeWorkflow: proves that every worker pool is polling its task queue.

`openclaw-rl up` runs it before it reports the stack as up; it is also a cheap,
durable end-to-end check (optionally waiting on a durable timer first).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from contracts.health import PING, PingInput, ProbeInput, ProbeResult
    from workflows.activity_calls import execute


@workflow.defn
class StackProbeWorkflow:
    @workflow.run
    async def run(self, inp: ProbeInput) -> ProbeResult:
        if inp.delay_s:
            await workflow.sleep(timedelta(seconds=inp.delay_s))
        pongs = []
        for pool, queue in sorted(inp.task_queues.items()):
            pong = await execute(PING, PingInput(pool=pool), task_queue=queue)
            pongs.append(pong)
        return ProbeResult(pongs=pongs)
