"""One terminal task folder, read and checked: the Terminal-Bench / Harbor layout (see README.md).

Loading is strict about what an episode cannot do without (an instruction and
checker tests) and lenient about the rest, so Harbor-style `task.toml` files
with extra sections load unchanged.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

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
    checker: Literal["pytest", "test.sh"] | None = None
    """None: pytest when tests/ has test_*.py files, else tests/test.sh. Harbor tasks usually ship both, and their
    test.sh installs pytest from the network, which the sandbox has not: pytest over the same files is what can
    run here (and it gives partial credit). Say "test.sh" for a task whose test.sh works offline."""


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
    def checker(self) -> Literal["pytest", "test.sh"]:
        """How the episode is checked: pytest over tests/test_*.py, or Harbor's `bash /tests/test.sh`."""
        if self.config.verifier.checker is not None:
            return self.config.verifier.checker
        return "pytest" if any(self.tests_dir.glob("test_*.py")) else "test.sh"

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
    config = TaskToml()
    toml_file = root / "task.toml"
    if toml_file.is_file():
        try:
            config = TaskToml.model_validate(tomllib.loads(toml_file.read_text(encoding="utf-8")))
        except (tomllib.TOMLDecodeError, ValidationError, UnicodeDecodeError) as e:
            raise MalformedTask(f"{toml_file}: {e}") from e
    task = TerminalTask(task_id=root.name, root=root, instruction=instruction, config=config)
    chosen = "task.toml's checker is" if config.verifier.checker else "no tests/test_*.py, so the checker is"
    if task.checker == "pytest" and not any(task.tests_dir.glob("test_*.py")):
        raise MalformedTask(f"{root}: {chosen} pytest, but there is no tests/test_*.py")
    if task.checker == "test.sh" and not (task.tests_dir / "test.sh").is_file():
        raise MalformedTask(f"{root}: {chosen} test.sh, but there is no tests/test.sh")
    return task
