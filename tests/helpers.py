"""Test helpers: free ports, real child processes, and waiting on them."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx

from stack.running import CLI, REPO, RunningStack, free_port, isolated_env

__all__ = ["CLI", "REPO", "RunningStack", "free_port", "pid_alive", "stack_env", "wait_http"]


def wait_http(url: str, timeout: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def stack_env(data_dir: Path, model_path: Path | None = None) -> dict[str, str]:
    """Environment for a stack on fresh random ports, isolated in `data_dir`."""
    return isolated_env(data_dir, model_path)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False
