"""`openclaw-rl bench personalization --quick`: the whole benchmark through the real stack, in miniature.

A miniature base model (noise, but the real code path), two simulated users chatting through the endpoint, the
heuristic judge, the sample stream, one training step and its weight update, then the base and the trained
version loaded into the engine and scored; the table, results.json and the PNG must come out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO, stack_env

pytestmark = pytest.mark.timeout(600)


def test_quick_bench_runs_the_stack_and_writes_json_and_png(tmp_path):
    env = stack_env(tmp_path / "data")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "bench", "personalization", "--quick", "--method", "combined",
         "--setting", "student", "--seed", "3", "--out", str(out)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=560,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "paper" in proc.stdout and "combined" in proc.stdout
    assert "training step" in proc.stderr  # the progress line
    results = json.loads((out / "results.json").read_text())
    m = results["methods"]["combined"]
    assert m["reached_version"] >= 1 and m["turns"] > 0
    assert m["judging"]["judged"] > 0 and m["judging"]["samples"] > 0
    assert set(m["versions"]) >= {"0", "1"}
    for v in m["versions"].values():
        assert 0.0 <= v["mean"] <= 1.0
    assert results["judge"] == "heuristic" and results["scorer"].startswith("rule")
    png = (out / "learning_curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
