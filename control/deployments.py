"""The workflow pool's Worker Deployment on Temporal: which builds exist, which is current, which drain.

A roll-out (docs/operations.md): start the new build's workflow worker beside the old one, `promote` it (all new
workflows, and long-running ones at their next continue-as-new, go to it; or `--ramp` a share first), and stop the
old worker once its versions report drained (every workflow pinned to it has ended).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import structlog
from google.protobuf.field_mask_pb2 import FieldMask
from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import VersionDrainageStatus, WorkerDeploymentVersionStatus
from temporalio.api.enums.v1 import VersioningBehavior as WireVersioningBehavior
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from openclaw_rl.settings import Settings

log = structlog.get_logger(__name__)

IDENTITY = "openclaw-rl"


class BuildState(BaseModel):
    build_id: str
    status: str
    """current, ramping, draining, drained, inactive or created (Temporal's WorkerDeploymentVersionStatus)."""
    drainage: str | None = None
    """draining or drained once no new workflow goes to it; None while it takes new workflows."""
    created_at: datetime | None = None


class DeploymentState(BaseModel):
    name: str
    current: str | None = None
    ramping: str | None = None
    ramping_percent: float = 0.0
    builds: list[BuildState] = []


def _short(enum_name: str, prefix: str) -> str:
    return enum_name.removeprefix(prefix).lower()


async def describe(client: Client, settings: Settings) -> DeploymentState | None:
    """The deployment's builds and routing; None when no versioned worker has polled yet."""
    name = settings.temporal.versioning.deployment_name
    try:
        resp = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=settings.temporal.namespace, deployment_name=name)
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    info = resp.worker_deployment_info
    routing = info.routing_config
    builds = []
    for v in info.version_summaries:
        drainage = VersionDrainageStatus.Name(v.drainage_status)
        builds.append(
            BuildState(
                build_id=v.deployment_version.build_id,
                status=_short(WorkerDeploymentVersionStatus.Name(v.status), "WORKER_DEPLOYMENT_VERSION_STATUS_"),
                drainage=None if v.drainage_status == 0 else _short(drainage, "VERSION_DRAINAGE_STATUS_"),
                created_at=v.create_time.ToDatetime() if v.HasField("create_time") else None,
            )
        )
    return DeploymentState(
        name=name,
        current=routing.current_deployment_version.build_id or None,
        ramping=routing.ramping_deployment_version.build_id or None,
        ramping_percent=routing.ramping_version_percentage,
        builds=sorted(builds, key=lambda b: b.created_at or datetime.min),
    )


async def make_current(client: Client, settings: Settings, build_id: str, wait_s: float = 30.0) -> None:
    """Route new workflows (and long-running ones at their next continue-as-new) to `build_id`. Its worker must have
    polled (the server learns a version from its first poll): asked again until then, for up to `wait_s`."""
    await _until_known(
        lambda: client.workflow_service.set_worker_deployment_current_version(
            SetWorkerDeploymentCurrentVersionRequest(
                namespace=settings.temporal.namespace,
                deployment_name=settings.temporal.versioning.deployment_name,
                build_id=build_id,
                identity=IDENTITY,
            )
        ),
        build_id,
        wait_s,
    )
    log.info("build made current", deployment=settings.temporal.versioning.deployment_name, build_id=build_id)


async def make_current_if_none(client: Client, settings: Settings, build_id: str, wait_s: float = 30.0) -> bool:
    """A fleet's first build: with no current build, new workflows would wait for a worker that never polls
    unversioned, so the first build to start makes itself current. Later builds wait to be promoted. True when it
    did."""
    state = await describe(client, settings)
    if state is not None and state.current is not None:
        return False
    await make_current(client, settings, build_id, wait_s)
    return True


async def release_pinned_elsewhere(client: Client, settings: Settings, build_id: str) -> int:
    """One box: a restart with new workflow code leaves the old build without a worker, and whatever was pinned to it
    would wait forever. Those workflows are moved to the current build (an AutoUpgrade override): their histories
    meet the new code, as they would without versioning. Returns how many moved."""
    deployment = settings.temporal.versioning.deployment_name
    query = f'ExecutionStatus = "Running" AND TemporalWorkerDeployment = "{deployment}"'
    moved = 0
    async for wf in client.list_workflows(query):
        desc = await client.get_workflow_handle(wf.id, run_id=wf.run_id).describe()
        info = desc.raw_description.workflow_execution_info.versioning_info
        pinned = info.behavior == WireVersioningBehavior.VERSIONING_BEHAVIOR_PINNED
        if not pinned or info.deployment_version.build_id in ("", build_id) or info.HasField("versioning_override"):
            continue
        try:
            await client.workflow_service.update_workflow_execution_options(
                UpdateWorkflowExecutionOptionsRequest(
                    namespace=settings.temporal.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=wf.id, run_id=wf.run_id),
                    workflow_execution_options=WorkflowExecutionOptions(
                        versioning_override=VersioningOverride(auto_upgrade=True)
                    ),
                    update_mask=FieldMask(paths=["versioning_override"]),
                    identity=IDENTITY,
                )
            )
        except RPCError as exc:  # closed since the listing, say: the others still move
            log.warning("could not move a workflow to the current build", workflow_id=wf.id, error=exc.message)
            continue
        moved += 1
        log.info("moved to the current build", workflow_id=wf.id, was=info.deployment_version.build_id, now=build_id)
    return moved


async def ramp(client: Client, settings: Settings, build_id: str, percent: float, wait_s: float = 30.0) -> None:
    """Send `percent` of new workflows to `build_id` (the rest to the current build)."""
    await _until_known(
        lambda: client.workflow_service.set_worker_deployment_ramping_version(
            SetWorkerDeploymentRampingVersionRequest(
                namespace=settings.temporal.namespace,
                deployment_name=settings.temporal.versioning.deployment_name,
                build_id=build_id,
                percentage=percent,
                identity=IDENTITY,
            )
        ),
        build_id,
        wait_s,
    )
    log.info("build ramping", build_id=build_id, percent=percent)


async def _until_known(call, build_id: str, wait_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        try:
            await call()
            return
        except RPCError as exc:
            unknown = exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION)
            if not unknown or asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(
                    f"build {build_id} could not be routed to: {exc.message} (has its workflow worker polled?)"
                ) from exc
            await asyncio.sleep(0.5)
