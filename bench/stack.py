"""The stack as the benchmarks drive it: `openclaw-rl up` plus what scoring versions one by one needs."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx

from stack.running import RunningStack

SETTLE_S = 8.0
"""Quiet time that ends training's tail after a pause: longer than a claim's wait (training.wait_s = 2 in the
benchmarks) plus a step and its weight publication for their small policies."""


class BenchStack(RunningStack):
    def served_weight_version(self) -> str:
        """The engine's weight version label: a policy version (`3`) or an evaluation's (`eval-3`)."""
        r = httpx.get(f"{self.engine}/get_weight_version", timeout=30)
        r.raise_for_status()
        body = r.json()
        return str(body.get("weight_version", body) if isinstance(body, dict) else body)

    def served_version(self) -> int:
        try:
            return int(self.served_weight_version())
        except ValueError:
            return 0

    def settle(self, quiet_s: float = SETTLE_S, timeout: float = 300.0) -> None:
        """After `train pause`: wait until no new policy version has reached the engine for `quiet_s`.

        A pause takes effect after the step in progress, and a claim already waiting may still bring a full batch
        and one more step; its weights reach the engine later. Scoring checks the served version anyway
        (`score_loaded`); this only makes a rescore rare.
        """
        deadline = time.monotonic() + timeout
        last, since = self.served_weight_version(), time.monotonic()
        while time.monotonic() - since < quiet_s:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the engine's weights kept changing for {timeout:.0f}s after pausing training")
            time.sleep(0.5)
            now = self.served_weight_version()
            if now != last:
                last, since = now, time.monotonic()

    def wait_durable(self, timeout_s: float = 600) -> dict:
        """The training status once every version trained is in a durable checkpoint (training is paused)."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.train_status()
            if not status.get("versions_since_durable"):
                return status
            if time.monotonic() > deadline:
                raise RuntimeError(f"versions still not on disk after {timeout_s:.0f}s: {status}")
            time.sleep(1)

    def train_status(self) -> dict:
        try:
            return json.loads(self.cli("train", "status", "--json"))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            return {}

    def load_version(self, model: Path, version: int) -> None:
        """Serve `version` (0: the base `model`) from its durable checkpoint, labelled `eval-<version>`."""
        path = model if version == 0 else self.data_dir / "checkpoints" / f"policy-{version}"
        r = httpx.post(
            f"{self.engine}/update_weights_from_disk",
            json={"model_path": str(path), "weight_version": f"eval-{version}"},
            timeout=600,
        )
        if r.status_code != 200 or not r.json().get("success", True):
            raise RuntimeError(f"the engine refused {path}: {r.text[:300]}")
