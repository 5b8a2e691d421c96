"""What a durable chat turn costs Temporal at the least, whatever our code does around it.

Starts the embedded Temporal dev server exactly as `openclaw-rl up` does (same flags, SQLite, dynamic config) and
drives it with requests of the shape a chat turn has, but with nothing inside: a workflow whose update handler
returns at once or runs an activity that returns its input. 16 sessions send --turns updates each, one at a time
per session, as the chat latency benchmark's 16-session run does. Per request it prints the CPU the Temporal
server spent and the CPU of this process (client and workers: the Python SDK and its Rust core), and the added
latency that CPU alone implies at 16 sessions on this machine's cores (16 x CPU / cores: sixteen turns at once
queue for the cores, whatever their order).

Shapes:
  - update + activity on another task queue: the chat turn (Update-with-start on the SessionWorkflow, whose
    handler runs `generate` on the policy pool's queue);
  - the same, sent as a plain update (the workflow already running);
  - update + local activity: the activity in the workflow worker, no activity task (not the design: the typed
    policy pool would be bypassed);
  - update alone: the handler returns at once.

    .venv/bin/python benchmarks/temporal_floor.py [--turns 10] [--sessions 16] [--synchronous normal]

--synchronous normal: SQLite without an fsync at every commit (the stack runs `full`: a turn acknowledged to a client
survives the machine's power going), to see what the fsyncs cost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity, workflow  # noqa: E402
from temporalio.client import Client, WithStartWorkflowOperation  # noqa: E402
from temporalio.common import WorkflowIDConflictPolicy  # noqa: E402
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker  # noqa: E402

from benchmarks.chat_latency import cpu_seconds, pct  # noqa: E402
from openclaw_rl.settings import load_settings  # noqa: E402
from stack.running import isolated_env  # noqa: E402
from stack.services import temporal_service  # noqa: E402

WORKFLOW_QUEUE, ACTIVITY_QUEUE = "floor-workflow", "floor-policy"


@activity.defn(name="floor_echo")
async def echo(x: str) -> str:
    return x


@workflow.defn(name="FloorSession", sandboxed=False)
class FloorSession:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.update
    async def turn(self, how: str) -> str:
        if how == "activity":
            return await workflow.execute_activity(
                echo, "x", task_queue=ACTIVITY_QUEUE, start_to_close_timeout=timedelta(seconds=30)
            )
        if how == "local":
            return await workflow.execute_local_activity(echo, "x", start_to_close_timeout=timedelta(seconds=30))
        return "x"

    @workflow.signal
    def end(self) -> None:
        self.done = True


@dataclass
class Shape:
    label: str
    handler: str
    with_start: bool


SHAPES = [
    Shape("Update-with-start + activity on another queue (the chat turn)", "activity", True),
    Shape("update + activity on another queue", "activity", False),
    Shape("update + local activity", "local", False),
    Shape("update alone", "none", False),
]


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system


async def measure(client: Client, server_pid: int, shape: Shape, sessions: int, turns: int) -> tuple[float, ...]:
    ids = [f"floor-{uuid.uuid4().hex[:8]}" for _ in range(sessions)]
    for wid in ids:
        await client.start_workflow(FloorSession.run, id=wid, task_queue=WORKFLOW_QUEUE)

    async def session(wid: str, n: int) -> list[float]:
        took = []
        for _ in range(n):
            t = time.perf_counter()
            if shape.with_start:
                op = WithStartWorkflowOperation(
                    FloorSession.run,
                    id=wid,
                    task_queue=WORKFLOW_QUEUE,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                )
                await client.execute_update_with_start_workflow(
                    FloorSession.turn, shape.handler, start_workflow_operation=op
                )
            else:
                await client.get_workflow_handle(wid).execute_update(FloorSession.turn, shape.handler)
            took.append(time.perf_counter() - t)
        return took

    await asyncio.gather(*(session(wid, 2) for wid in ids))  # warm: sticky caches, connections
    server0, own0 = cpu_seconds(server_pid), own_cpu()
    latencies = [x for xs in await asyncio.gather(*(session(wid, turns) for wid in ids)) for x in xs]
    server1, own1 = cpu_seconds(server_pid), own_cpu()
    for wid in ids:
        await client.get_workflow_handle(wid).signal(FloorSession.end)
    n = len(latencies)
    return 1000 * (server1 - server0) / n, 1000 * (own1 - own0) / n, 1000 * pct(latencies, 0.5)


async def run(sessions: int, turns: int, synchronous: str) -> None:
    os.environ.update(isolated_env(Path(tempfile.mkdtemp(prefix="temporal-floor-")) / "data"))
    settings = load_settings()
    settings.temporal.headless = True
    argv = temporal_service(settings).argv
    if "synchronous=full" not in argv:
        raise SystemExit("the stack no longer starts Temporal with synchronous=full: update this benchmark")
    argv = [f"synchronous={synchronous}" if a == "synchronous=full" else a for a in argv]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                client = await Client.connect(settings.temporal.target())
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)
        # The stack's workers keep this many polls open per task kind (temporal.worker_pollers).
        polls = PollerBehaviorSimpleMaximum(settings.temporal.worker_pollers)
        workflow_worker = Worker(
            client,
            task_queue=WORKFLOW_QUEUE,
            workflows=[FloorSession],
            activities=[echo],  # the local activity runs here
            workflow_task_poller_behavior=polls,
            activity_task_poller_behavior=polls,
        )
        policy_worker = Worker(
            client, task_queue=ACTIVITY_QUEUE, activities=[echo], activity_task_poller_behavior=polls
        )
        cores = os.cpu_count() or 1
        print(
            f"Temporal dev server as `openclaw-rl up` starts it (SQLite synchronous={synchronous}); "
            f"{sessions} sessions x {turns} turns; {cores} cores"
        )
        print(f"{'request shape':<64}{'server':>9}{'SDK':>8}{'p50':>9}{'implied added':>15}")
        async with workflow_worker, policy_worker:
            for shape in SHAPES:
                server_ms, sdk_ms, p50 = await measure(client, server.pid, shape, sessions, turns)
                implied = sessions * (server_ms + sdk_ms) / cores
                print(f"{shape.label:<64}{server_ms:>7.1f}ms{sdk_ms:>6.1f}ms{p50:>7.1f}ms{implied:>13.0f}ms")
        print(
            "server / SDK: CPU per request of the Temporal server and of this process (client and both workers);\n"
            f"implied added: {sessions} requests at once x that CPU / {cores} cores, before any of the turn's own work"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--turns", type=int, default=10, help="requests per session, one at a time")
    ap.add_argument("--synchronous", choices=["full", "normal"], default="full", help="SQLite's synchronous pragma")
    args = ap.parse_args()
    asyncio.run(run(args.sessions, args.turns, args.synchronous))


if __name__ == "__main__":
    main()
