"""The FAST base policies the learning claims start from, built once and shipped with the tests
(tests/fixtures/models/): the agents' (800 pretraining steps on one thread, 5-8 minutes of a test worker) and the
personal agent's (300 steps, about a minute). Each build gives the same weights every time, so rebuilding them on
every run was the suite's largest single waste. A claim installs its copy where its benchmark looks for the cached
build (same folder name, same recipe digest), so nothing else changes. The builder stays under test: the benchmark
tests build their miniature models.

When a recipe or its corpus changes, its digest changes, and tests/bench/test_shipped_models.py says so. Rebuild:

    .venv/bin/python -m tests.bench.shipped_models
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench import pretraining
from bench.agents import basemodel as agents
from bench.personalization import basemodel as personal

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "models"
REBUILD = ".venv/bin/python -m tests.bench.shipped_models"


@dataclass(frozen=True)
class Shipped:
    folder: str
    corpus: pretraining.Corpus
    recipe: pretraining.Recipe

    @property
    def fixture(self) -> Path:
        return FIXTURES / self.folder

    def digest(self) -> str:
        return self.corpus.digest(self.recipe)

    def shipped_digest(self) -> str | None:
        try:
            return json.loads((self.fixture / self.corpus.marker).read_text()).get("digest")
        except (OSError, ValueError):
            return None

    def install(self, models_dir: Path) -> Path:
        """Put the shipped build where its benchmark looks for the cached build in `models_dir`."""
        if self.shipped_digest() != self.digest():
            raise RuntimeError(f"{self.fixture} is not of today's recipe (digest {self.digest()}): `{REBUILD}`")
        target = self.corpus.folder(models_dir, self.recipe)
        shutil.copytree(self.fixture, target)
        return target

    def rebuild(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            built = pretraining.ensure_model(Path(tmp) / "models" / "x", self.corpus, self.recipe, force=True)
            shutil.rmtree(self.fixture, ignore_errors=True)
            shutil.copytree(built, self.fixture)


AGENT_FAST = Shipped("agent-base-fast", agents.BUILDS["fast"].corpus, agents.BUILDS["fast"].recipe)
"""`bench agents --build fast`: tests/bench/test_agents_learn.py."""
PERSONAL_FAST = Shipped("personal-base-fast", personal.CORPUS, personal.FAST)
"""`bench personalization --recipe fast`: tests/bench/test_personalization_learns.py."""
SHIPPED = (AGENT_FAST, PERSONAL_FAST)


def main() -> int:
    for model in SHIPPED:
        model.rebuild()
        print(f"{model.fixture}: digest {model.shipped_digest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
