"""Which users' adapters a durable checkpoint may hold: the layout of per-user adapters in a checkpoint and the
forgotten owners beside the checkpoints, under one lock.

Apart from the trainer (trainers/user_adapters.py) because the forget path (control/user_adapters.py, run by the
API) needs it too, and the API must not import torch to remove a folder."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

USER_ADAPTERS_DIR = "user-adapters"
"""In a durable checkpoint of per-user training: one folder per user (by tenant pseudonym), as `AdapterBank.save`."""


FORGOTTEN_OWNERS = "forgotten-adapter-owners"
"""Beside the durable checkpoints: the pseudonyms of forgotten users, a line each. A checkpoint written while a forget
ran would otherwise hold the forgotten user's adapter again after the forget removed every copy it found."""


@contextlib.contextmanager
def owners_lock(checkpoints: Path) -> Iterator[set[str]]:
    """Held by a forget from marking a user forgotten to removing their adapter from every checkpoint, and by a
    checkpoint write from reading the forgotten to its folder's rename: one of them sees the other's work whole.
    Yields the forgotten owners."""
    checkpoints = Path(checkpoints)
    checkpoints.mkdir(parents=True, exist_ok=True)
    with open(checkpoints / f".{FORGOTTEN_OWNERS}.lock", "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            path = checkpoints / FORGOTTEN_OWNERS
            yield set(path.read_text().split()) if path.is_file() else set()
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def mark_forgotten(checkpoints: Path, owner: str) -> None:
    """Add `owner` to the forgotten (call with `owners_lock` held)."""
    with open(Path(checkpoints) / FORGOTTEN_OWNERS, "a") as f:
        f.write(owner + "\n")
        f.flush()
        os.fsync(f.fileno())
