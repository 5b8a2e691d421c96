"""Durable checkpoints on their own cadence: room made for them first, written beside the train steps, confirmed by
the training workflow once their samples are recorded as trained.

Room: a checkpoint needs about what the last one took (or, before any, the model's size times what full
fine-tuning keeps per parameter). Older confirmed checkpoints are pruned to the count (`checkpoint.keep`) and the
byte budget (`checkpoint.budget_gb`); if the disk still lacks that much plus `checkpoint.disk_reserve_gb`, nothing
is written and the activity fails with DISK_FULL (the workflow pauses training with the reason): the reserve keeps
room for the store's append-only file, Temporal's database and the logs, which must go on working.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import structlog
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from contracts.training import ConfirmInput, DurableCheckpoint
from openclaw_rl.checkpoints import (
    checkpoint_bytes,
    confirm,
    folder_bytes,
    newest_version,
    prune_versions,
    read_version_label,
    version_dir,
)
from openclaw_rl.settings import Settings
from openclaw_rl.trained_log import record_durable
from trainers.trainer_state import Snapshot

log = structlog.get_logger(__name__)

GB = 1024**3


class DiskFull(ApplicationError):
    def __init__(self, message: str):
        super().__init__(message, type=ErrorType.DISK_FULL, non_retryable=True)


def needed_bytes(settings: Settings) -> int:
    """About what the next durable checkpoint takes: the newest one's size, else an estimate from the model."""
    root = settings.checkpoints_dir
    newest = newest_version(root)
    if newest and version_dir(root, newest).is_dir():
        return folder_bytes(version_dir(root, newest))
    return checkpoint_bytes(settings.served_model_path(), lora=settings.training.lora.enabled)


def make_room(settings: Settings, version: int) -> tuple[int, list[int]]:
    """Prune older checkpoints so the next one fits the count and the budget; raises DiskFull when the disk cannot
    take it and the reserve. Returns (bytes needed, versions pruned)."""
    cfg = settings.training.checkpoint
    root = settings.checkpoints_dir
    root.mkdir(parents=True, exist_ok=True)
    need = needed_bytes(settings)
    budget = int(cfg.budget_gb * GB) if cfg.budget_gb is not None else None
    # Room for the new one beside `keep - 1` old ones: the newest confirmed one stays until the new one is confirmed.
    pruned = prune_versions(root, version, max(1, cfg.keep - 1), budget_bytes=budget, room_for=need)
    free = shutil.disk_usage(root).free
    reserve = int(cfg.disk_reserve_gb * GB)
    if free < need + reserve:
        raise DiskFull(
            f"no room for the durable checkpoint of version {version}: it needs about {need / GB:.2f} GB and "
            f"{reserve / GB:.2f} GB are kept free for the store and Temporal, but the disk of {root} has "
            f"{free / GB:.2f} GB free. Training pauses; free space (or lower training.checkpoint.keep), then "
            "`openclaw-rl train resume`"
        )
    if budget is not None and need > budget:
        raise DiskFull(
            f"the durable checkpoint of version {version} needs about {need / GB:.2f} GB, more than "
            f"training.checkpoint.budget_gb ({cfg.budget_gb} GB). Training pauses; raise the budget, then "
            "`openclaw-rl train resume`"
        )
    return need, sorted(_version_of(p) for p in pruned)


def write(settings: Settings, snapshot: Snapshot, version: int, since: int, step: int) -> tuple[Path, float]:
    """Write `snapshot` as the durable checkpoint of `version` (atomically); returns its folder and the seconds."""
    folder = version_dir(settings.checkpoints_dir, version)
    started = time.perf_counter()
    snapshot.write(folder, str(version), {"durable": True, "since": since, "trainer_step": step})
    return folder, time.perf_counter() - started


def confirm_checkpoint(settings: Settings, inp: ConfirmInput) -> None:
    """The checkpoint marked confirmed, then its batches recorded as trained (once), then older ones pruned to the
    count and budget. The caller acknowledges the batches' entries after this.

    Marked first: a trainer killed in between leaves a confirmed checkpoint whose batches the workflow finds and
    confirms again (recorded then); recorded first, it would leave them recorded under a version nobody resumes
    from, and recorded a second time when trained again.

    A checkpoint that is not on disk whole fails it with CHECKPOINT_MISSING before anything is marked, recorded or
    acknowledged: its batches would count as trained with nothing holding them, and never be trained again."""
    folder = Path(inp.checkpoint.path)
    _require_complete(folder, inp.checkpoint.version)
    confirm(folder)
    record_durable(
        settings.records_dir,
        inp.checkpoint.version,
        inp.since,
        [b.model_dump(include={"version", "batch", "sample_ids", "stale_ids", "missing"}) for b in inp.batches],
    )
    cfg = settings.training.checkpoint
    budget = int(cfg.budget_gb * GB) if cfg.budget_gb is not None else None
    prune_versions(settings.checkpoints_dir, inp.checkpoint.version, cfg.keep, budget_bytes=budget)


def _require_complete(folder: Path, version: int) -> None:
    """The checkpoint of `version` is at `folder`, whole. A checkpoint is written in a staging folder and renamed into
    place with its version file in it (openclaw_rl.checkpoints.atomic_dir), so a folder whose version file names
    `version` is complete; no folder, no version file, or another version's, is none to confirm."""
    label = read_version_label(folder)
    if label == str(version):
        return
    why = (
        "no such folder" if not folder.is_dir() else "no version file" if label is None else f"it holds version {label}"
    )
    raise ApplicationError(
        f"the durable checkpoint of version {version} is not on disk whole at {folder} ({why}): its batches are not "
        "recorded as trained. Training pauses; after `openclaw-rl train resume` the next durable checkpoint holds them",
        type=ErrorType.CHECKPOINT_MISSING,
        non_retryable=True,
    )


def _version_of(folder: Path) -> int:
    tail = folder.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def checkpoint_result(folder: Path, version: int, snapshot_s: float, write_s: float, pruned: list[int]):
    return DurableCheckpoint(
        version=version,
        path=str(folder),
        bytes=folder_bytes(folder),
        snapshot_s=round(snapshot_s, 3),
        write_s=round(write_s, 3),
        pruned=pruned,
    )
