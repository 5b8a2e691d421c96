"""`openclaw-rl up` in a child process, as a user runs it: isolated in its own data directory, on free ports.

For code that drives the whole system from outside (the end-to-end tests, the personalization benchmark): start it,
read its `stack.json`, run `openclaw-rl` commands against it, stop it with Ctrl-C as a person would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openclaw_rl.ports import free_port

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cli"]
OWN_ENV = ("TEMPORAL_ADDRESS", "REDIS_URL")
"""Variables besides OPENCLAW_RL_* that would point the child at another stack's services."""


DRAWN_PORTS = (
    "OPENCLAW_RL_API__PORT",
    "OPENCLAW_RL_ENGINE__PORT",
    "OPENCLAW_RL_TEMPORAL__PORT",
    "OPENCLAW_RL_TEMPORAL__UI_PORT",
    "OPENCLAW_RL_REDIS__PORT",
)
"""The ports `isolated_env` draws (and `RunningStack.start` draws again when one was taken meanwhile)."""
PORT_RETRIES = 2


def isolated_env(data_dir: Path, model_path: Path | None = None) -> dict[str, str]:
    """This process's environment without its stack settings, for a stack on fresh ports in `data_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_") and k not in OWN_ENV}
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
    """`openclaw-rl up` with the settings in `env` (see `isolated_env`); its output goes to `log_path`.

    `command` runs the CLI (this interpreter's `-m cli` from the checkout unless given; an installed `openclaw-rl`
    script, for one, run in `cwd` outside the checkout so that only the installed package is importable)."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None, cwd: Path | None = None):
        self.env = env
        self.command = list(command or CLI)
        self.cwd = cwd or REPO
        self.data_dir = Path(env["OPENCLAW_RL_DATA_DIR"])
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-up.log"
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

    def start(self, timeout: float = 240.0) -> RunningStack:
        """Start `up` and wait until its stack.json says every service is up.

        A port drawn by `isolated_env` can be taken by another process between the draw and the service's bind (a
        free port is only free until someone binds it; seen once in a full suite on 2 workers): then `up` stops
        with "already in use" (its preflight's or the service's own error), and the stack starts once more on
        freshly drawn ports (`self.env` is updated in place, so the caller's env and the URLs above follow)."""
        for attempt in range(PORT_RETRIES + 1):
            try:
                return self._start_once(timeout)
            except RuntimeError as exc:
                if attempt == PORT_RETRIES or "already in use" not in str(exc):
                    raise
                for key in DRAWN_PORTS:
                    if key in self.env:
                        self.env[key] = str(free_port())
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> RunningStack:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command + ["up"], env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"`openclaw-rl up` exited with {self.proc.returncode}:\n{self.output()}")
            if (self.state() or {}).get("status") == "up":
                return self
            time.sleep(0.3)
        raise TimeoutError(f"the stack was not up after {timeout:.0f}s:\n{self.output()}")

    def state(self) -> dict | None:
        """stack.json as `up` last wrote it; None before it is written (or while it is being replaced)."""
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

    def output(self, chars: int = 4000) -> str:
        """The end of `up`'s output."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def cli(self, *args: str, timeout: float = 120) -> str:
        """Run `openclaw-rl ARGS` against this stack; its stdout, or a RuntimeError with its output."""
        out = subprocess.run(
            self.command + list(args), env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.cwd
        )
        if out.returncode != 0:
            raise RuntimeError(f"openclaw-rl {' '.join(args)} failed: {out.stdout[-800:]}{out.stderr[-800:]}")
        return out.stdout

    def stop(self, timeout: float = 60.0) -> int:
        """Ctrl-C, and `up`'s exit code; past `timeout` it is killed and TimeoutExpired raised."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def __enter__(self) -> RunningStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
