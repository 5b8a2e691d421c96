"""Which build of the workflow code this worker is, for Temporal Worker Versioning (`temporal.versioning`).

Only the workflow pool is versioned: it alone runs workflow code, whose change can break a running history. The
activity pools stay unversioned; a pinned workflow's activities go to whichever worker of their queue polls.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from temporalio.common import VersioningBehavior
from temporalio.worker import WorkerDeploymentConfig, WorkerDeploymentVersion

from openclaw_rl.settings import Settings

WORKFLOW_CODE = ("workflows", "contracts")
"""The packages whose code decides a history's commands: a change in them is a new build."""


@cache
def workflow_code_build_id() -> str:
    """`wf-` and 12 hex digits of a hash over the workflow code's files (paths and contents, in order)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in WORKFLOW_CODE:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"wf-{digest.hexdigest()[:12]}"


def build_id(settings: Settings) -> str:
    return settings.temporal.versioning.build_id or workflow_code_build_id()


def deployment_version(settings: Settings) -> WorkerDeploymentVersion:
    return WorkerDeploymentVersion(settings.temporal.versioning.deployment_name, build_id(settings))


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The workflow worker's deployment: Pinned unless a workflow says otherwise (a continue-as-new that upgrades);
    None when versioning is off."""
    if not settings.temporal.versioned():
        return None
    return WorkerDeploymentConfig(
        version=deployment_version(settings),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )
