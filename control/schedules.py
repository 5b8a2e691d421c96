"""The Temporal Schedules `up` keeps in line with the settings (evaluation, users' progress reports): created, or
brought up to the settings' action and interval with their paused state kept, or deleted when off."""

from __future__ import annotations

import dataclasses

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode


async def put_schedule(
    client: Client, schedule_id: str, action: ScheduleActionStartWorkflow, spec: ScheduleSpec, note: str
) -> tuple[ScheduleHandle, bool]:
    """The schedule with this action and spec (a run still going when the next is due: that one is dropped, not
    queued); whether it was created now (False: an existing one was updated, its paused state kept)."""
    try:
        schedule = Schedule(
            action=action,
            spec=spec,
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            state=ScheduleState(note=note),
        )
        return await client.create_schedule(schedule_id, schedule), True
    except ScheduleAlreadyRunningError:
        handle = client.get_schedule_handle(schedule_id)

        def updated(current: ScheduleUpdateInput) -> ScheduleUpdate:
            kept = current.description.schedule
            return ScheduleUpdate(schedule=dataclasses.replace(kept, action=action, spec=spec))

        await handle.update(updated)
        return handle, False


async def delete_schedule(client: Client, schedule_id: str) -> bool:
    """Whether there was one to delete."""
    try:
        await client.get_schedule_handle(schedule_id).delete()
        return True
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return False
        raise
