"""The checkpoint layout on disk, in one place: folder names, the version label file, atomic writes, pruning.

checkpoints/policy-<v>/            a servable Hugging Face checkpoint per trained version
    openclaw-rl-version.json       its weight version, step, backend and step summary
checkpoints/saved/<label>/         a copy kept on request, never pruned
    openclaw-rl-saved.json         which version it is
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VERSION_FILE = "openclaw-rl-version.json"
SAVED_MANIFEST = "openclaw-rl-saved.json"
_PREFIX = "policy-"


def version_dir(root: Path, version: int) -> Path:
    return Path(root) / f"{_PREFIX}{version}"


def saved_dir(root: Path, label: str) -> Path:
    return Path(root) / "saved" / label


def read_version_info(folder: Path) -> dict[str, Any] | None:
    """What the trainer wrote beside the weights, or None for a checkpoint it did not write."""
    try:
        info = json.loads((Path(folder) / VERSION_FILE).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def read_version_label(folder: Path) -> str | None:
    """A checkpoint written by our trainer carries its policy version beside the weights."""
    info = read_version_info(folder)
    return str(info["weight_version"]) if info and "weight_version" in info else None


def write_version_info(folder: Path, info: dict[str, Any]) -> None:
    (Path(folder) / VERSION_FILE).write_text(json.dumps(info))


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a staging folder; on success it replaces `target` whole, so a reader never sees a half-written checkpoint.

    Every file and the folder itself are fsynced before the rename: after a crash the
    new name points at complete data or the old folder is still there.
    """
    target = Path(target)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        _fsync_tree(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        _fsync(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def newest_version(root: Path) -> int:
    """The highest version with a checkpoint folder under `root` (0: only the served base model)."""
    versions = [int(p.name[len(_PREFIX) :]) for p in Path(root).glob(f"{_PREFIX}*") if p.name[len(_PREFIX) :].isdigit()]
    return max(versions, default=0)


def prune_versions(root: Path, newest: int, keep: int) -> list[Path]:
    """Delete version folders more than `keep` behind `newest`; saved checkpoints are elsewhere and never touched."""
    removed = []
    for folder in Path(root).glob(f"{_PREFIX}*"):
        try:
            v = int(folder.name[len(_PREFIX) :])
        except ValueError:
            continue
        if v <= newest - keep:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            _fsync(path)
    _fsync(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
