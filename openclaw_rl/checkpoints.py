"""The checkpoint layout on disk, in one place: folder names, the version label file, atomic writes, pruning.

checkpoints/policy-<v>/            a durable checkpoint: servable Hugging Face weights, optimizer and trainer state
    openclaw-rl-version.json       its weight version, step, backend (and, before durable cadences, a step summary)
    openclaw-rl-confirmed          the training workflow recorded its samples as trained (durable checkpoints
                                   written on a cadence); one without it was never confirmed and is not resumed from
checkpoints/serve/v<v>/            weights only, in the served dtype: a version published through disk
checkpoints/saved/<label>/         a copy kept on request, never pruned
    openclaw-rl-saved.json         which version it is
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VERSION_FILE = "openclaw-rl-version.json"
SAVED_MANIFEST = "openclaw-rl-saved.json"
CONFIRMED = "openclaw-rl-confirmed"
_PREFIX = "policy-"
SERVE_DIR = "serve"
KEEP_SERVED = 2
"""Weights-only folders of disk publications kept: the version served and the one before (a server restarting
mid-publication may still load it)."""


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
def staged_dir(target: Path, prefix: str) -> Iterator[Path]:
    """Yield a fresh staging folder beside `target`; on success it is made readable by all (0o755) and replaces
    `target` whole, so a reader finds the old folder or the new one, never half of one.

    For built artifacts (the tiny model, a base policy, generated task folders): each build stages under a name of
    its own, so builders racing for one target (two test workers) never write into one folder. Nothing is fsynced:
    a crash loses the build, never a checkpoint (`atomic_dir` is the durable write).
    """
    target = Path(target)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    try:
        yield staging
        staging.chmod(0o755)  # mkdtemp makes it private; what is built here is meant to be shared
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


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


def served_dir(root: Path, version: int) -> Path:
    return Path(root) / SERVE_DIR / f"v{version}"


def _versions(root: Path) -> dict[int, Path]:
    out = {}
    for p in Path(root).glob(f"{_PREFIX}*"):
        tail = p.name[len(_PREFIX) :]
        if tail.isdigit() and p.is_dir():
            out[int(tail)] = p
    return out


def is_confirmed(folder: Path) -> bool:
    """A checkpoint to resume from: confirmed by the training workflow, or written before confirmations existed
    (every step wrote and recorded its own checkpoint then)."""
    info = read_version_info(folder)
    if info is None:
        return False
    return not info.get("durable") or (Path(folder) / CONFIRMED).is_file()


def confirm(folder: Path) -> None:
    """Mark a durable checkpoint confirmed: the training workflow holds its batches trained (recorded right after)."""
    marker = Path(folder) / CONFIRMED
    marker.write_text("")
    _fsync(marker)
    _fsync(Path(folder))


def newest_version(root: Path) -> int:
    """The highest confirmed version with a checkpoint folder under `root` (0: only the served base model)."""
    return max((v for v, p in _versions(root).items() if is_confirmed(p)), default=0)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def prune_versions(
    root: Path, newest: int, keep: int, budget_bytes: int | None = None, room_for: int = 0
) -> list[Path]:
    """Keep the newest `keep` confirmed checkpoints up to `newest`, and fewer while they and `room_for` more bytes
    would exceed `budget_bytes`; the newest confirmed one always stays. Unconfirmed ones older than `newest` are
    orphans (their versions were trained again) and go; newer ones may still be confirmed and stay. Saved
    checkpoints are elsewhere and never touched."""
    found = _versions(root)
    confirmed = sorted((v for v, p in found.items() if v <= newest and is_confirmed(p)), reverse=True)
    kept = confirmed[:keep]
    if budget_bytes is not None:
        sizes = {v: folder_bytes(found[v]) for v in kept}
        while len(kept) > 1 and sum(sizes[v] for v in kept) + room_for > budget_bytes:
            kept.pop()
    removed = []
    for v, folder in found.items():
        if v in kept or v > newest:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def prune_served(root: Path, newest: int) -> None:
    """Weights-only folders of disk publications older than the last KEEP_SERVED."""
    for folder in (Path(root) / SERVE_DIR).glob("v*"):
        tail = folder.name[1:]
        if tail.isdigit() and int(tail) <= newest - KEEP_SERVED:
            shutil.rmtree(folder, ignore_errors=True)


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


def parameter_count(model_dir: Path) -> int:
    """Parameters of a Hugging Face checkpoint, from its safetensors headers (no tensor is read)."""
    total = 0
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in meta["shape"]:
                count *= int(dim)
            total += count
    return total


FULL_STATE_BYTES_PER_PARAM = 12
"""fp32 weights (4) and AdamW's two moments (8) per parameter: what a durable checkpoint of full fine-tuning holds."""
MERGED_BYTES_PER_PARAM = 4
"""LoRA: the merged fp32 weights the servers load; the adapter and its optimizer state are small beside them."""


def checkpoint_bytes(model_dir: Path, lora: bool = False) -> int:
    """About what one durable checkpoint of the model at `model_dir` takes on disk."""
    per = MERGED_BYTES_PER_PARAM if lora else FULL_STATE_BYTES_PER_PARAM
    return parameter_count(model_dir) * per
