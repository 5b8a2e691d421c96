"""One terminal task folder, read and checked: the Terminal-Bench / Harbor layout (see README.md).

Loading is strict about what an episode cannot do without (an instruction and
checker tests) and lenient about the rest, so Harbor-style `task.toml` files
with extra sections load unchanged.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

TITLE_CHARS = 100


class MalformedTask(ValueError):
    """A task folder an episode cannot be built from (no instruction, no tests, unreadable task.toml)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Metadata(_Section):
    title: str = ""
    category: str = ""
    difficulty: str = ""


class AgentConfig(_Section):
    max_steps: int | None = Field(None, ge=1)


class VerifierConfig(_Section):
    # Harbor spells it timeout_sec; both are read so its task.toml files load as they are.
    timeout_s: float = Field(60.0, gt=0, validation_alias=AliasChoices("timeout_s", "timeout_sec"))


class TaskToml(_Section):
    metadata: Metadata = Field(default_factory=Metadata)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)


class TerminalTask(BaseModel):
    """Everything about a task that is known before an episode starts."""

    task_id: str
    root: Path
    instruction: str
    config: TaskToml

    @property
    def title(self) -> str:
        """task.toml's title, else the instruction's first non-empty line (markdown heading marks removed)."""
        if self.config.metadata.title:
            return self.config.metadata.title[:TITLE_CHARS]
        for line in self.instruction.splitlines():
            if line.strip():
                return line.strip().lstrip("#").strip()[:TITLE_CHARS]
        return self.task_id

    @property
    def environment_dir(self) -> Path | None:
        d = self.root / "environment"
        return d if d.is_dir() else None

    @property
    def setup_script(self) -> Path | None:
        p = self.root / "setup.sh"
        return p if p.is_file() else None

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path | None:
        d = self.root / "solution"
        return d if (d / "solve.sh").is_file() else None


def load_task(root: Path) -> TerminalTask:
    """Read one task folder; `MalformedTask` says what is missing or wrong."""
    root = Path(root)
    instruction_file = root / "instruction.md"
    if not instruction_file.is_file():
        raise MalformedTask(f"{root}: no instruction.md")
    instruction = instruction_file.read_text(encoding="utf-8").strip()
    if not instruction:
        raise MalformedTask(f"{root}: instruction.md is empty")
    tests = root / "tests"
    if not tests.is_dir() or not any(tests.glob("test_*.py")):
        raise MalformedTask(f"{root}: no tests/test_*.py (the checker)")
    config = TaskToml()
    toml_file = root / "task.toml"
    if toml_file.is_file():
        try:
            config = TaskToml.model_validate(tomllib.loads(toml_file.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, ValidationError, UnicodeDecodeError) as e:
            raise MalformedTask(f"{toml_file}: {e}") from e
    return TerminalTask(task_id=root.name, root=root, instruction=instruction, config=config)
