"""What each process `up` starts imports before it serves: only the trainer and the judge (advantages) may load torch.

Every stack start launches the API, six workers and the engine at once; a process that loads torch and transformers
for nothing costs seconds of a core each (the API did, through the forget path, 7 s of its start) and a bigger image.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

HEAVY = ("torch", "transformers")
PROBE = """
import importlib, json, sys
for name in sys.argv[1].split(","):
    importlib.import_module(name)
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
""".format(heavy=repr(set(HEAVY)))

LIGHT = {
    "api": ["api.main", "api.app"],
    "cli": ["cli.main"],
    "launcher": ["stack.launcher"],
    "worker-workflow": ["workers.main", "workers.pools", "activities.turn_log", "workflows.training"],
    "worker-policy": ["activities.agent_step", "activities.evaluation", "activities.generate", "activities.learning"],
    "worker-env": ["activities.env_step", "workers.env_capacity"],
    "engine (before its model)": ["engine.main"],
}


@pytest.mark.parametrize("process", sorted(LIGHT))
def test_a_process_that_never_trains_starts_without_torch(process: str):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(LIGHT[process])], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [], f"{process} imports {done.stdout.strip()} at start"
