"""A service killed with -9 leaves nothing running: its next start (or the stack's stop) kills what it had started."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from stack.process import ManagedProcess, ServiceSpec

# A service that starts a long-lived grandchild (as an env worker starts chromium) and writes its pid down.
SCRIPT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _ready() -> bool:
    return True


def _service(tmp_path) -> tuple[ManagedProcess, object]:
    pid_file = tmp_path / "grandchild.pid"
    spec = ServiceSpec("leaky", [sys.executable, "-c", SCRIPT, str(pid_file)], _ready)
    return ManagedProcess(spec, tmp_path), pid_file


def _started(p: ManagedProcess, pid_file) -> int:
    pid_file.unlink(missing_ok=True)
    p.start()
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the service never started its child"
        time.sleep(0.05)
    return int(pid_file.read_text())


def _kill_9(p: ManagedProcess) -> None:
    os.kill(p.pid, signal.SIGKILL)
    p.proc.wait(timeout=10)


@pytest.mark.asyncio
async def test_a_restart_kills_what_the_dead_incarnation_left_running(tmp_path):
    p, pid_file = _service(tmp_path)
    first = _started(p, pid_file)
    _kill_9(p)
    assert _alive(first)  # orphaned, as a killed env worker's chromium was
    second = _started(p, pid_file)
    deadline = time.monotonic() + 10
    while _alive(first):
        assert time.monotonic() < deadline, "the dead incarnation's child is still running"
        time.sleep(0.05)
    assert _alive(second)
    await p.stop()
    _kill_9_if_alive(second)


@pytest.mark.asyncio
async def test_stopping_a_dead_service_kills_its_leftovers(tmp_path):
    p, pid_file = _service(tmp_path)
    child = _started(p, pid_file)
    _kill_9(p)
    await p.stop()
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "stop left the dead service's child running"
        time.sleep(0.05)


def _kill_9_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
