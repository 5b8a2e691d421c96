"""What a run of the training loop cost, read from outside: per version, from the TrainingWorkflow's own histories
(train step, time until every server serves it, durable checkpoints), the bytes the trainer process wrote, and
the GPU memory each process of the stack holds. Used by benchmarks/soak.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client


@dataclass
class ActivityRun:
    name: str
    scheduled: float
    started: float | None = None
    closed: float | None = None
    ok: bool = False
    result: dict | None = None


@dataclass
class VersionFigures:
    version: int
    train_s: float
    """The train_step activity, started to completed (what the step kept the trainer busy for)."""
    compute_s: float | None
    """The optimizer step alone (forward, backward, update), as the step reports it."""
    served_after_s: float | None
    """From the train step's end to every server serving the version (publish_weights completed)."""


@dataclass
class LoopFigures:
    versions: list[VersionFigures] = field(default_factory=list)
    checkpoints: list[float] = field(default_factory=list)
    """Durable checkpoint writes (seconds each), where they are an activity of their own (beside the steps)."""
    snapshots: list[float] = field(default_factory=list)
    """What each durable checkpoint held the steps up for (its state copied aside)."""
    publish_s: list[float] = field(default_factory=list)
    """The publication activity, started to completed."""
    handover_s: list[float] = field(default_factory=list)
    """Within it, the hand-over itself (checking the servers' versions, packing, every server loading), where the
    publication says."""
    routes: dict[str, int] = field(default_factory=dict)
    """How versions reached the servers (memory, distributed, disk), where the publication says."""
    failed: dict[str, int] = field(default_factory=dict)
    """Activity attempts that failed or timed out, by activity."""
    trained_ids: list[str] = field(default_factory=list)
    """The samples each completed train step trained, in order (a sample twice here was trained twice)."""
    stale_dropped: int = 0
    """Samples the completed steps dropped as too stale."""


async def training_activities(client: Client) -> list[ActivityRun]:
    """Every activity of every run of the stack's TrainingWorkflows, in history order."""
    runs: list[ActivityRun] = []
    async for wf in client.list_workflows("WorkflowType = 'TrainingWorkflow'"):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        by_id: dict[int, ActivityRun] = {}
        for ev in history.events:
            t = ev.event_time.ToDatetime().timestamp()
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                a = ActivityRun(ev.activity_task_scheduled_event_attributes.activity_type.name, scheduled=t)
                by_id[ev.event_id] = a
                runs.append(a)
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                by_id[ev.activity_task_started_event_attributes.scheduled_event_id].started = t
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                attrs = ev.activity_task_completed_event_attributes
                a = by_id[attrs.scheduled_event_id]
                a.closed, a.ok = t, True
                payloads = attrs.result.payloads
                if payloads:
                    try:
                        a.result = json.loads(payloads[0].data)
                    except ValueError:
                        a.result = None
            elif ev.event_type in (
                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
            ):
                attrs = ev.activity_task_failed_event_attributes or ev.activity_task_timed_out_event_attributes
                by_id[attrs.scheduled_event_id].closed = t
    return sorted(runs, key=lambda a: a.scheduled)


def loop_figures(runs: list[ActivityRun]) -> LoopFigures:
    out = LoopFigures()
    pending: VersionFigures | None = None
    step_end = 0.0
    for a in runs:
        if not a.ok:
            if a.closed is not None:
                out.failed[a.name] = out.failed.get(a.name, 0) + 1
            continue
        if a.name == "train_step" and a.result:
            out.trained_ids += a.result.get("sample_ids") or []
            out.stale_dropped += int(a.result.get("dropped_stale") or 0)
        if a.name == "train_step" and a.result and a.result.get("trained"):
            metrics = a.result.get("metrics") or {}
            compute = metrics.get("step_s")
            if compute is None and metrics.get("tokens_per_s"):  # before steps reported their own time
                compute = metrics["tokens"] / metrics["tokens_per_s"] if metrics.get("tokens") else None
            pending = VersionFigures(
                version=int(a.result["version"]),
                train_s=a.closed - (a.started or a.scheduled),
                compute_s=compute,
                served_after_s=None,
            )
            step_end = a.closed
            out.versions.append(pending)
        elif a.name in ("publish_weights", "publish_version") and pending is not None:
            if pending.served_after_s is None:
                pending.served_after_s = a.closed - step_end
                route = (a.result or {}).get("route") if isinstance(a.result, dict) else None
                if route:
                    out.routes[route] = out.routes.get(route, 0) + 1
                    out.handover_s.append(a.result.get("seconds"))
                out.publish_s.append(a.closed - (a.started or a.scheduled))
        elif a.name == "start_checkpoint":
            out.snapshots.append(a.closed - (a.started or a.scheduled))
        elif a.name == "finish_checkpoint":
            out.checkpoints.append((a.result or {}).get("write_s") or a.closed - (a.started or a.scheduled))
    return out


def written_bytes(pid: int) -> int | None:
    """Bytes the process caused to be written to storage (/proc/<pid>/io write_bytes); None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def gpu_memory_by_pid() -> dict[int, int]:
    """MiB of GPU memory each process holds (nvidia-smi); empty without a GPU."""
    if shutil.which("nvidia-smi") is None:
        return {}
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
    )
    found = {}
    for line in out.stdout.splitlines():
        try:
            pid, mib = (int(x.strip()) for x in line.split(","))
        except ValueError:
            continue
        found[pid] = found.get(pid, 0) + mib
    return found


def median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
