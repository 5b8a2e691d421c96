"""Test helpers: free ports, real child processes, and waiting on them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENCLAW_RL_") and k not in ("TEMPORAL_ADDRESS", "REDIS_URL")
    }
    env.update(
        OPENCLAW_RL_DATA_DIR=str(data_dir),
        OPENCLAW_RL_API__PORT=str(free_port()),
        OPENCLAW_RL_ENGINE__PORT=str(free_port()),
        OPENCLAW_RL_TEMPORAL__PORT=str(free_port()),
        OPENCLAW_RL_TEMPORAL__UI_PORT=str(free_port()),
        OPENCLAW_RL_REDIS__PORT=str(free_port()),
        OPENCLAW_RL_ENGINE__TORCH_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    if model_path is not None:
        env["OPENCLAW_RL_ENGINE__MODEL_PATH"] = str(model_path)
    return env


class RunningStack:
    """`openclaw-rl up` as a user runs it, in a child process."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.data_dir = Path(env["OPENCLAW_RL_DATA_DIR"])
        self.out_path = self.data_dir.parent / f"{self.data_dir.name}-up.log"
        self.proc: subprocess.Popen | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.env['OPENCLAW_RL_API__PORT']}"

    @property
    def engine(self) -> str:
        return f"http://127.0.0.1:{self.env['OPENCLAW_RL_ENGINE__PORT']}"

    @property
    def temporal(self) -> str:
        return f"127.0.0.1:{self.env['OPENCLAW_RL_TEMPORAL__PORT']}"

    @property
    def redis(self) -> str:
        return f"redis://127.0.0.1:{self.env['OPENCLAW_RL_REDIS__PORT']}/0"

    def start(self, timeout: float = 240.0) -> "RunningStack":
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.out_path, "ab")
        self.proc = subprocess.Popen(CLI + ["up"], env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`up` exited with {self.proc.returncode}:\n{self.output()}")
            if (self.state() or {}).get("status") == "up":
                return self
            time.sleep(0.3)
        raise TimeoutError(f"stack not up after {timeout}s:\n{self.output()}")

    def state(self) -> dict | None:
        try:
            return json.loads((self.data_dir / "stack.json").read_text())
        except (OSError, ValueError):
            return None

    def service_pid(self, name: str) -> int:
        return int(self.state()["services"][name]["pid"])

    def wait_restarted(self, name: str, old_pid: int, timeout: float = 60.0) -> int:
        """Wait until the supervisor has brought `name` back with a new pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            svc = (self.state() or {}).get("services", {}).get(name, {})
            if svc.get("pid") and svc["pid"] != old_pid and svc.get("running"):
                return int(svc["pid"])
            time.sleep(0.2)
        raise TimeoutError(f"{name} was not restarted:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.out_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def __enter__(self) -> "RunningStack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
