"""`openclaw-rl bench agents --quick`: the agent benchmark through the real stack, in miniature.

A miniature base agent (noise, but the real code path), in the tool-call setting (the terminal one runs in
test_agents_learn.py, through the same runner, with a real base): a rollout of task groups
with episodes on the env pool in the sandbox and step votes on the judge pool, samples on the setting's stream, one
training step and its weight update; then the base and the trained version loaded into the engine and scored on
held-out task groups that publish nothing. The table, results.json and a PNG per setting must come out, and bad
arguments must be refused.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO, stack_env

pytestmark = pytest.mark.timeout(600)


def test_quick_agents_bench_trains_scores_and_writes_json_and_png(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "agents", "--quick", "--setting", "toolcall", "--reward", "integrated",
         "--out", str(out)],
        env=stack_env(tmp_path / "data"), cwd=REPO, capture_output=True, text=True, timeout=560,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Held-out success, toolcall" in proc.stdout
    assert "integrated" in proc.stdout and "paper" in proc.stdout
    assert "training step" in proc.stderr  # the progress line
    results = json.loads((out / "results.json").read_text())
    for setting in ("toolcall",):
        r = results["settings"][setting]["rewards"]["integrated"]
        assert r["reached_version"] >= 1 and r["training"]["samples_trained"] >= 4, (setting, r)
        assert r["rollout"]["episodes_done"] > 0 and r["rollout"]["published"] > 0
        assert set(r["versions"]) >= {"0", "1"}
        for v in r["versions"].values():
            assert v["episodes"] + v["failed_episodes"] == 4 and 0.0 <= v["mean"] <= 1.0
        assert r["gains"]["1"]["problems"] <= 4
        png = (out / f"{setting}_curve.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_bad_arguments_get_a_message_not_a_traceback(tmp_path):
    env = stack_env(tmp_path / "data")
    cases = (
        (["--eval-tasks", "100000"], "eval_tasks is at most"),
        (["--eval-samples", "0"], "at least 1"),
        (["--setting", "gui"], "invalid choice"),
    )
    for args, says in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "cli", "bench", "agents", *args],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
