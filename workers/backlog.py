"""A pool's task-queue backlog, read from Temporal and exported with the pool's metrics: the signal to scale on.

One `BacklogPoller` per worker process (workers.main starts it beside the pool's workers when the pool serves
metrics) asks the frontend every `metrics.backlog_interval_s` for its own queue's stats (DescribeTaskQueue with
`report_stats`), for the workflow and the activity task type, and sets gauges on the SDK's metric meter, so
they are served on the pool's /metrics endpoint with the SDK's own series (tagged `pool` there):

- `openclaw_task_queue_backlog{queue,task_type}`: Temporal's approximate backlog count (tasks waiting for a
  worker; sticky workflow tasks excluded, as the server counts them), over every build polling the queue;
- `openclaw_task_queue_backlog_age_seconds{queue,task_type}`: the age of the oldest task waiting;
- `openclaw_task_queue_tasks_add_rate` / `..._dispatch_rate{queue,task_type}`: tasks per second in and out
  (the server's 30 s averages); add minus dispatch is the rate the backlog grows;
- `openclaw_task_queue_backlog_stale{queue,task_type}`: 1 while the last read failed (the other gauges then
  keep the last value read), else 0.

A read that fails is logged at warning and retried at the next interval; it never stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterable
from datetime import timedelta

import structlog
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import MetricMeter

log = structlog.get_logger(__name__)

TASK_TYPES = {"workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY}
READ_TIMEOUT = timedelta(seconds=10)


@dataclasses.dataclass
class Backlog:
    """One queue and task type's last reading."""

    count: int = 0
    age_s: float = 0.0
    add_rate: float = 0.0
    dispatch_rate: float = 0.0
    stale: bool = True
    """True until a read succeeds, and again while reads fail (the values are then the last ones read)."""


class BacklogPoller:
    def __init__(
        self,
        client: Client,
        meter: MetricMeter | None,
        queues: Iterable[str],
        interval_s: float,
        task_types: Iterable[str] = tuple(TASK_TYPES),
    ):
        self.client, self.interval_s = client, interval_s
        self.keys = [(q, t) for q in queues for t in task_types]
        self.last: dict[tuple[str, str], Backlog] = {k: Backlog() for k in self.keys}
        self._gauges = {k: self._gauges_for(meter, *k) for k in self.keys} if meter is not None else {}

    @staticmethod
    def _gauges_for(meter: MetricMeter, queue: str, task_type: str) -> tuple:
        m = meter.with_additional_attributes({"queue": queue, "task_type": task_type})
        return (
            m.create_gauge("openclaw_task_queue_backlog", "Approximate tasks waiting in the task queue (Temporal)"),
            m.create_gauge_float(
                "openclaw_task_queue_backlog_age_seconds", "Age of the oldest task waiting in the task queue"
            ),
            m.create_gauge_float("openclaw_task_queue_tasks_add_rate", "Tasks added to the task queue per second"),
            m.create_gauge_float(
                "openclaw_task_queue_tasks_dispatch_rate", "Tasks dispatched from the task queue per second"
            ),
            m.create_gauge("openclaw_task_queue_backlog_stale", "1 while the backlog's last read failed"),
        )

    async def read(self, queue: str, task_type: str) -> Backlog:
        resp = await self.client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=self.client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TASK_TYPES[task_type],
                report_stats=True,
            ),
            timeout=READ_TIMEOUT,
        )
        s = resp.stats
        age = s.approximate_backlog_age
        return Backlog(
            count=max(0, s.approximate_backlog_count),
            age_s=max(0.0, age.seconds + age.nanos / 1e9),
            add_rate=max(0.0, s.tasks_add_rate),
            dispatch_rate=max(0.0, s.tasks_dispatch_rate),
            stale=False,
        )

    async def poll_once(self) -> None:
        for key in self.keys:
            try:
                self.last[key] = await self.read(*key)
            except Exception as exc:  # noqa: BLE001 - a metric is never worth the worker
                self.last[key] = dataclasses.replace(self.last[key], stale=True)
                log.warning(
                    "task queue backlog not read",
                    queue=key[0],
                    task_type=key[1],
                    error=f"{type(exc).__name__}: {exc}",
                )
            self._export(key)

    def _export(self, key: tuple[str, str]) -> None:
        if key not in self._gauges:
            return
        b = self.last[key]
        count, age, add, dispatch, stale = self._gauges[key]
        try:
            count.set(b.count)
            age.set(b.age_s)
            add.set(b.add_rate)
            dispatch.set(b.dispatch_rate)
            stale.set(int(b.stale))
        except Exception as exc:  # noqa: BLE001 - any error of the meter
            log.warning("task queue backlog not exported", error=f"{type(exc).__name__}: {exc}")

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            await self.poll_once()
            await asyncio.sleep(self.interval_s)

    @contextlib.asynccontextmanager
    async def running(self):
        task = asyncio.create_task(self.run(), name="task-queue-backlog")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
