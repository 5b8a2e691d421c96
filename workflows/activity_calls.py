"""Calling an activity from workflow code by its definition (contracts.activity).

The name, result type, timeouts and retry policy all come from the definition;
a workflow passes only the task queue and the timeouts a deployment configures.
The priority comes from here too (contracts.priorities): every activity runs at its
workflow's rank, with the workflow's fairness key and weight.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from contracts.activity import ActivityDef, Retry
    from contracts.priorities import rank_of

In = TypeVar("In")
Out = TypeVar("Out")


def retry_policy(r: Retry) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=r.initial_interval,
        backoff_coefficient=r.backoff,
        maximum_interval=r.maximum_interval,
        maximum_attempts=r.maximum_attempts,
        non_retryable_error_types=[str(t) for t in r.non_retryable] or None,
    )


def priority() -> Priority:
    """The calling workflow's rank (contracts.priorities), fairness key and weight.

    The key and weight are written out although the server would inherit them: the scheduled event then shows
    what the task was queued with (Temporal 1.32's ActivityTaskScheduled shows only what the command set)."""
    own = workflow.info().priority
    return Priority(
        priority_key=rank_of(workflow.info().workflow_type, own.priority_key),
        fairness_key=own.fairness_key,
        fairness_weight=own.fairness_weight,
    )


async def execute(
    defn: ActivityDef[In, Out],
    inp: In,
    *,
    task_queue: str,
    start_to_close: timedelta | None = None,
    heartbeat: timedelta | None = None,
    schedule_to_start: timedelta | None = None,
) -> Any:
    return await workflow.execute_activity(
        defn.name,
        inp,
        result_type=defn.output,
        task_queue=task_queue,
        start_to_close_timeout=start_to_close or defn.start_to_close,
        schedule_to_close_timeout=defn.schedule_to_close,
        schedule_to_start_timeout=schedule_to_start or defn.schedule_to_start,
        heartbeat_timeout=heartbeat or defn.heartbeat,
        retry_policy=retry_policy(defn.retry),
        priority=priority(),
    )
