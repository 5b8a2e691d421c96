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

WORKFLOW_CODE = (
    "workflows",
    "contracts",
    "evals",
    "rlmath",
    "store",
    "openclaw_rl/search_attributes.py",
    "openclaw_rl/tracing.py",
)
"""What workflow code imports, whose change can alter a history's commands: a change in any of it is a new build
(more often than needed, never less)."""


@cache
def workflow_code_build_id() -> str:
    """`wf-` and 12 hex digits of a hash over the workflow code's files (paths and contents, line ends normalized)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    files = 0
    for part in WORKFLOW_CODE:
        path = root / part
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []:
            text = source.read_bytes().replace(b"\r\n", b"\n")
            digest.update(str(source.relative_to(root)).encode() + b"\0" + text + b"\0")
            files += 1
    if not files:
        raise RuntimeError(
            f"no workflow source found under {root}: set temporal.versioning.build_id (this install has no .py files)"
        )
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
