"""The FAST base agent policy, built once and shipped with the tests (tests/fixtures/models/agent-base-fast).

Its build is 800 pretraining steps on one thread: 5-8 minutes of a test worker, the same weights every time, and
the largest single waste in the suite when rebuilt on every run. The learning claim (tests/bench/test_agents_learn.py)
starts from this copy; `bench agents` takes it as its cached build (same folder name, same recipe digest), so
nothing else changes. The builder itself stays under test: the benchmark tests build their miniature models.

When the FAST recipe or its corpus changes, its digest changes, and the test of this module says so. Rebuild:

    .venv/bin/python -m tests.bench.fast_agent_model
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from bench.agents import basemodel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "agent-base-fast"
BUILD = basemodel.BUILDS["fast"]
REBUILD = ".venv/bin/python -m tests.bench.fast_agent_model"


def shipped_digest() -> str | None:
    try:
        return json.loads((FIXTURE / BUILD.corpus.marker).read_text()).get("digest")
    except (OSError, ValueError):
        return None


def install(models_dir: Path) -> Path:
    """Put the shipped build where `bench agents` looks for its FAST build in `models_dir`."""
    want = BUILD.corpus.digest(BUILD.recipe)
    if shipped_digest() != want:
        raise RuntimeError(f"the shipped FAST model is not of today's recipe (digest {want}): rebuild it, `{REBUILD}`")
    target = basemodel.default_dir(models_dir, BUILD)
    shutil.copytree(FIXTURE, target)
    return target


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        built = basemodel.ensure_base_model(Path(tmp) / "models" / "fast", BUILD, force=True)
        shutil.rmtree(FIXTURE, ignore_errors=True)
        shutil.copytree(built, FIXTURE)
    print(f"{FIXTURE}: digest {shipped_digest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
