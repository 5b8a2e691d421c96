"""`openclaw-rl bench scale` at a tiny size: the figures are there, no errors, the costs positive."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_scale_tiny(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "scale", "--sessions", "10,20", "--episodes", "4", "--samples", "4",
           "--data-dir", str(tmp_path / "scale")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")}
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"scale: 20 sessions [\d.]+ turns/s p99 \d+ ms, 4 episodes [\d.]+ steps/s, cost per turn flat within \d+%, "
        r"per step within \d+%, errors 0",
        last,
    ), last
    for kind, unit in (("sessions", "turn"), ("episodes", "step")):
        costs = re.findall(rf"([\d.]+) events/{unit}, ([\d.]+) actions/{unit}", out.stdout)
        assert costs and all(float(e) > 0 and float(a) > 0 for e, a in costs), (kind, out.stdout)
    assert all(int(b) > 0 for b in re.findall(r"store (\d+) B/", out.stdout)), out.stdout
