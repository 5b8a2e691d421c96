"""The one-call GPU checks (benchmarks/gpu_loop_check.sh, gpu_speed_check.sh) run on a CPU with the tiny model.

On a lent GPU they run on random models of real shapes; here the same scripts and code paths run (a real engine,
the trainer, the whole stack for the soak, the memory hand-off through /dev/shm instead of CUDA IPC), so a check
that would break on the GPU machine breaks here first, at no GPU time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO


def run_gpu_check(script: str, out: Path, models: Path, **env: str) -> list[tuple[str, int]]:
    full = os.environ | {"OUT": str(out), "PYTHON": sys.executable, "MODELS": str(models)} | env
    done = subprocess.run(
        ["bash", f"benchmarks/{script}"], cwd=REPO, env=full, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    steps = [(label, int(rc)) for label, rc, _ in rows]
    assert all(rc == 0 for _, rc in steps), (steps, done.stdout[-4000:], done.stderr[-4000:])
    return steps


def test_the_loop_check_hands_over_falls_back_resumes_and_soaks_with_memory_released(tmp_path):
    out = tmp_path / "loop"
    steps = run_gpu_check("gpu_loop_check.sh", out, tmp_path / "models", PARTS="a c", BIG_MINUTES="0.3", DRAIN_S="40")
    assert [label[:3] for label, _ in steps] == ["(a)", "(c)"]

    handoff = json.loads((out / "handoff.json").read_text())
    assert handoff["ok"] is True
    assert [v["route"] for v in handoff["versions"]] == ["memory"] * 3
    assert all(v["same_tokens_as_disk"] and v["max_logprob_diff_vs_disk"] == 0 for v in handoff["versions"])
    checks = handoff["checks"]
    assert checks["fallback"]["route"] == "disk" and checks["fallback"]["served"] == "4"
    assert checks["release_resume"]["same_answer"] is True
    assert checks["logprob_gap"]["tokens"] == 16 * 64 and handoff["gap"]["max"] < 1e-4  # fp32 on both sides

    soak = json.loads((out / "soak-4b.json").read_text())
    assert soak["settings"]["OPENCLAW_RL_TRAINING__ENGINE_MEMORY_DURING_STEP"] == "all"
    assert soak["errors_by_status"] == {} and soak["gave_up"] == 0
    assert soak["samples_judged"] == soak["samples_expected"] > 0
    assert soak["duplicate_records"] == 0 and soak["trained_twice"] == 0 and soak["trained_not_published"] == 0
    assert soak["train_steps"] >= 1 and soak["samples_trained"] >= soak["batch_size"]
    assert soak["routes"] == {"memory": soak["train_steps"]}
    assert soak["engine_tps_unloaded"] > 0 and soak["engine_tps_loaded"]


def test_the_speed_check_runs_the_trainer_the_engine_and_a_shared_prefix(tmp_path):
    out = tmp_path / "speed"
    steps = run_gpu_check("gpu_speed_check.sh", out, tmp_path / "models", PARTS="train engine prefix", ROUNDS="1")
    assert len(steps) == 4
    prefix = json.loads((out / "prefix.json").read_text())
    assert prefix["shared"]["rows"] == 16 and prefix["shared"]["decode_tokens_per_s"] > 0
    assert prefix["shared"]["cached_share"] > 0.9  # the prefix came from the cache
