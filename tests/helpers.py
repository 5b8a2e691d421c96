"""Test helpers: free ports, real child processes, and waiting on them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from stack.running import CLI, REPO, RunningStack, free_port, isolated_env

__all__ = [
    "CLI",
    "REPO",
    "RunningStack",
    "free_port",
    "pid_alive",
    "running_valkey",
    "stack_env",
    "store_at",
    "wait_http",
]


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


@contextmanager
def running_valkey(folder: Path, timeout: float = 20.0) -> Iterator[int]:
    """A bare valkey server (no persistence) on a free loopback port, for tests that need only a store; its port."""
    import redis

    from stack.preflight import find_valkey_binary

    port = free_port()
    proc = subprocess.Popen(
        [str(find_valkey_binary()), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "valkey did not start"
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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


def store_at(port: int, ttl_s: int = 3600):
    """A store client (store.client.Store) on a loopback valkey, per-turn data kept `ttl_s`."""
    from store.client import Store, StoreAddress

    return Store.connect(StoreAddress(f"redis://127.0.0.1:{port}/0", ttl_s))


def workflow_exists(stack: RunningStack, workflow_id: str) -> bool:
    """Whether Temporal has the workflow (its latest run), asked of the stack's server."""
    from temporalio.client import Client
    from temporalio.service import RPCError, RPCStatusCode

    async def describe() -> bool:
        client = await Client.connect(stack.temporal)
        try:
            await client.get_workflow_handle(workflow_id).describe()
            return True
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise

    return asyncio.run(describe())
