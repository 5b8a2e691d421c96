"""Billable Temporal Cloud actions and history events, counted from a workflow history's events (JSON form).

What counts is listed at https://docs.temporal.io/cloud/actions; benchmarks/temporal_actions.py explains the
choices (its recorded histories) and `openclaw-rl bench scale` applies them to a live stack's histories.
"""

from __future__ import annotations

from collections import Counter

COUNTED = {
    "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED": "workflow started",
    "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED": "activity",
    "EVENT_TYPE_TIMER_STARTED": "timer",
    "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED": "signal",
    "EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED": "signal",
    "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED": "update",
    "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES": "upsert",
    "EVENT_TYPE_MARKER_RECORDED": "marker",
    "EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED": "cancel external",
}


def actions(events: list[dict]) -> Counter:
    """Billable actions of one run's history, by kind (activities also by type: `activity:<type>`)."""
    out: Counter = Counter()
    for e in events:
        kind = COUNTED.get(e["eventType"])
        if kind == "marker":
            attrs = e.get("markerRecordedEventAttributes", {})
            if attrs.get("markerName") == "core_patch":
                out["patch marker (not counted)"] += 1
                continue
        if kind == "activity":
            out[f"activity:{e['activityTaskScheduledEventAttributes']['activityType']['name']}"] += 1
        elif kind is not None:
            out[kind] += 1
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_STARTED":
            retries = int(e["activityTaskStartedEventAttributes"].get("attempt", 1)) - 1
            if retries > 0:
                out["activity retry"] += retries
    return out


def total(c: Counter) -> int:
    return sum(v for k, v in c.items() if k != "patch marker (not counted)")


def updates(events: list[dict]) -> int:
    return sum(e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED" for e in events)


def count(events: list[dict], activity: str) -> int:
    return sum(
        e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
        and e["activityTaskScheduledEventAttributes"]["activityType"]["name"] == activity
        for e in events
    )
