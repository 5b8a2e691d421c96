"""A supervised child process: started in its own session, logged to a file, stopped in order."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import structlog

from openclaw_rl.procs import processes

log = structlog.get_logger(__name__)

ReadyCheck = Callable[[], Awaitable[bool]]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Children get SIGTERM if the launcher dies without cleaning up (Linux)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


ONE_BOX_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
"""Defaults for every service `up` starts (the operator's environment overrides them). The stack's processes share
the machine's cores (engine, trainer, judge all run torch), and OpenMP's threads spin at a barrier by default: with
more threads than free cores they spin against each other. Measured on 2 cores, three torch processes of 2 threads
each (a small MLP's train steps): 60 s each spinning, 3.3-5.2 s passive; alone, passive costs nothing measurable."""


@dataclass
class ServiceSpec:
    name: str
    argv: list[str]
    ready: ReadyCheck
    ready_timeout_s: float = 60.0
    stop_timeout_s: float = 15.0
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    secrets: tuple[str, ...] = ()
    """Values on the command line that its log's start line masks (the log outlives the process)."""
    inherit_env: bool = True
    """Start from the launcher's environment (`up`); False: `env` is the whole environment (a host of
    stack.hosts, whose settings must not leak in from the harness's own)."""


class ServiceFailed(RuntimeError):
    pass


class ManagedProcess:
    def __init__(self, spec: ServiceSpec, log_dir: Path):
        self.spec = spec
        self.log_path = log_dir / f"{spec.name}.log"
        self.proc: subprocess.Popen | None = None
        self.restarts: list[float] = []

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.kill_leftovers()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab", buffering=0)
        command = " ".join(self.spec.argv)
        for secret in filter(None, self.spec.secrets):
            command = command.replace(secret, "***")
        out.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {command}\n".encode())
        base = ONE_BOX_ENV | (dict(os.environ) if self.spec.inherit_env else {})
        env = base | {"PYTHONUNBUFFERED": "1"} | self.spec.env
        self.proc = subprocess.Popen(
            self.spec.argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.spec.cwd,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
            preexec_fn=_die_with_parent,
        )
        out.close()
        log.info("service started", service=self.spec.name, pid=self.proc.pid)

    def kill_leftovers(self) -> int:
        """SIGKILL what a dead incarnation left running in its process group (a killed env worker's browser and
        driver, a worker's stray children); returns how many were found.

        The group is the dead leader's pid (each incarnation starts its own session). Linux does not hand out a pid
        still in use as a group id, so a group that still answers is that incarnation's, never a stranger's.
        """
        if self.proc is None or self.proc.poll() is None:
            return 0
        pgid = self.proc.pid
        left = [pid for pid in _group_members(pgid) if pid != os.getpid()]
        if not left:
            return 0
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return 0
        log.warning("killed what a dead service left running", service=self.spec.name, pids=left)
        return len(left)

    async def wait_ready(self) -> None:
        deadline = time.monotonic() + self.spec.ready_timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise ServiceFailed(
                    f"{self.spec.name} exited with code {self.proc.returncode if self.proc else '?'} while starting; "
                    f"last lines of {self.log_path}:\n{self.tail()}"
                )
            try:
                if await self.spec.ready():
                    return
            except Exception:  # not ready yet: connection refused and the like
                pass
            await asyncio.sleep(0.25)
        raise ServiceFailed(
            f"{self.spec.name} was not ready after {self.spec.ready_timeout_s:.0f}s; "
            f"see {self.log_path}:\n{self.tail()}"
        )

    async def stop(self) -> None:
        if not self.running():
            self.kill_leftovers()
            return
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + self.spec.stop_timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.proc.poll() is None:
            log.warning("service did not stop in time; killing", service=self.spec.name)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            while self.proc.poll() is None:
                await asyncio.sleep(0.05)
        log.info("service stopped", service=self.spec.name, code=self.proc.returncode)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _group_members(pgid: int) -> list[int]:
    """Pids of the live processes in process group `pgid` (from /proc; zombies left out)."""
    return [p.pid for p in processes() if p.pgrp == pgid and p.state != "Z"]
