"""`openclaw-rl bench two-users --quick --mode per_user`: the two-user benchmark's new path in miniature.

Two simulated users with opposite tastes chat at once, each with their own key; per-user training gives each an
adapter of their own; scoring loads each user's adapter into the engine and generates through it. A miniature
model (noise): this checks the path and the outputs, not learning (docs/personalization-benchmark.md has the
figures of the full run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, stack_env

pytestmark = pytest.mark.timeout(600)


def test_quick_two_users_trains_and_scores_each_users_own_adapter(tmp_path):
    env = stack_env(tmp_path / "data")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "two-users", "--quick", "--mode", "per_user", "--seed", "1",
         "--keep-data", "--out", str(out)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=560,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split()[:2] for line in proc.stdout.splitlines()]
    assert ["per_user", "student"] in rows and ["per_user", "manager"] in rows  # the table
    r = json.loads((out / "results.json").read_text())["modes"]["per_user"]
    assert min(r["reached"].values()) >= 1 and all(u["turns"] > 0 for u in r["users"].values())
    assert r["judging"]["samples"] > 0 and r["training"]["samples_trained"] > 0
    v1 = r["versions"]["1"]
    folders = {user: Path(v1[user]["adapter"]) for user in ("student", "manager")}
    assert folders["student"] != folders["manager"]  # each user's answers came through their own adapter
    weights = {u: (f / "adapter_model.safetensors").read_bytes() for u, f in folders.items()}
    assert weights["student"] != weights["manager"]  # trained on different samples
    for entry in v1.values():
        assert 0.0 <= entry["mean"] <= 1.0 and len(entry["per_problem"]) == 4
    png = (out / "two_users.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
