"""Do general agents learn? A few training steps of terminal episodes through the real stack, in minutes.

The FAST base agent policy (terminal episodes only, a short pretraining from its fixed seed) ships with the tests
(tests/bench/shipped_models.py: its build was 5-8 minutes of a worker on every run), then
`openclaw-rl bench agents` runs it: task groups of counting tasks in the sandbox on the env pool, outcome rewards,
(group, step) advantages, the training workflow, new weights served; then the base and the last version are loaded
into the engine and score held-out tasks (never trained on, their instructions never in pretraining).

What counts as learning: the held-out success's gain from the base to the last version, paired over tasks, must
exceed `Z_MARGIN` standard errors. Measured on 2 cores with a 1-thread build beside it (2026-11-25): the build
285 s (506 s in a full suite run), the run 158 s (115 s alone from the shipped build, 2026-11-28); base 0.49,
version 2 +0.33 (z 5.8), version 4 +0.43 (z 8.1): the base answers without running the command 41% of the time,
version 4 2.5%. With training disabled (`--lr 1e-9`: the same steps, weights
unchanged) it fails, as it must: +0.12 (z 1.6). docs/agents-benchmark.md.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.agents import basemodel
from tests.bench.shipped_models import AGENT_FAST
from tests.helpers import REPO, stack_env

pytestmark = pytest.mark.timeout(1500)

Z_MARGIN = 3.0
"""A one-sided 3-sigma bound: the gain is learning, not a lucky draw of episodes."""
STEPS = 4
RUN = [
    "--build", "fast", "--setting", "terminal", "--reward", "outcome", "--seed", "0",
    "--steps", str(STEPS), "--curve-every", str(STEPS), "--eval-tasks", "60", "--eval-samples", "2",
    "--batch-size", "32", "--lr", "4e-4", "--parallel", "8", "--timeout-s", "600",
]  # fmt: skip


def test_a_few_training_steps_raise_held_out_success_beyond_its_noise(tmp_path):
    out = tmp_path / "out"
    AGENT_FAST.install(tmp_path / "data" / "models")
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "agents", *RUN, "--out", str(out)],
        env=stack_env(tmp_path / "data"), cwd=REPO, capture_output=True, text=True, timeout=1440,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    r = results["settings"]["terminal"]["rewards"]["outcome"]
    report = json.dumps({k: r.get(k) for k in ("versions", "gains", "training", "rewards_seen")}, indent=1)
    assert results["base_model"]["digest"] == basemodel.FAST_CORPUS.digest(basemodel.FAST)
    assert r["reached_version"] >= STEPS, report
    gain = r["gains"][str(STEPS)]
    assert gain["problems"] == 60
    assert (out / "terminal_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert gain["z"] > Z_MARGIN, f"no gain beyond {Z_MARGIN} standard errors after {STEPS} steps: {report}"
