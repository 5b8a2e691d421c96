"""SWE task records: SWE-bench instances whose repositories lie on local disk (see README.md).

An instance file is JSON Lines, one SWE-bench instance per line, with SWE-bench's
field names. `repo` is a folder (relative to the instance file's folder, or
absolute) instead of a GitHub name; `base_commit`, when set, is checked out of
that folder's git history, otherwise the folder is taken as it is. Extra fields
(SWE-bench's `hints_text`, `version`, `created_at`, ...) are kept and ignored.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

TITLE_CHARS = 100


class MalformedInstance(ValueError):
    """An instance line an episode cannot be built from (bad JSON, a missing field, no such repository)."""


class SweInstance(BaseModel):
    model_config = ConfigDict(extra="allow")

    instance_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")
    repo: str
    """The repository folder: absolute, or relative to the instance file's folder (`repo_path` resolves it)."""
    base_commit: str = ""
    """A commit of `repo`'s git history to start from; empty: the folder as it is (its .git left out)."""
    problem_statement: str = Field(min_length=1)
    patch: str = ""
    """The oracle fix, a unified diff (git apply -p1) over the repository."""
    test_patch: str = Field(min_length=1)
    """The hidden tests, a unified diff applied only by the verifier."""
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    category: str = ""
    """Ours, optional: a label for listings (the bug's kind)."""
    source_file: Path | None = Field(None, exclude=True)
    """The instance file it was read from (set by `load_instances`)."""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, v: object) -> object:
        # SWE-bench's own files store these lists as JSON text.
        return json.loads(v) if isinstance(v, str) else v

    @property
    def repo_path(self) -> Path:
        p = Path(self.repo).expanduser()
        if not p.is_absolute() and self.source_file is not None:
            p = self.source_file.parent / p
        return p

    @property
    def title(self) -> str:
        for line in self.problem_statement.splitlines():
            if line.strip():
                return line.strip().lstrip("#").strip()[:TITLE_CHARS]
        return self.instance_id

    @property
    def tests(self) -> list[str]:
        """Every test the verdict needs, FAIL_TO_PASS first, each once."""
        return list(dict.fromkeys([*self.FAIL_TO_PASS, *self.PASS_TO_PASS]))


def load_instances(path: Path) -> tuple[list[SweInstance], dict[str, str]]:
    """The instances of one JSONL file, and the lines it could not use (`line N` -> why)."""
    found: list[SweInstance] = []
    skipped: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            inst = SweInstance.model_validate({**json.loads(line), "source_file": Path(path).resolve()})
        except (ValueError, ValidationError) as e:  # JSONDecodeError is a ValueError
            skipped[f"{path}:{n}"] = str(e).splitlines()[0][:300]
            continue
        if not inst.repo_path.is_dir():
            skipped[f"{path}:{n}"] = f"{inst.instance_id}: no repository folder {inst.repo_path}"
            continue
        found.append(inst)
    return found, skipped


def snapshot(inst: SweInstance, dest: Path) -> None:
    """Write the repository's starting state into `dest` (an empty folder), without any .git."""
    src = inst.repo_path
    if inst.base_commit:
        # The task's repository may belong to another user: git refuses it unless marked safe.
        archive = subprocess.run(
            ["git", "-c", f"safe.directory={src}", "-C", str(src), "archive", "--format=tar", inst.base_commit],
            capture_output=True,
            timeout=300,
        )
        if archive.returncode != 0:
            raise MalformedInstance(
                f"{inst.instance_id}: cannot check out {inst.base_commit} of {src}: {archive.stderr.decode()[-500:]}"
            )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, filter="tar")
        return
    shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=True, ignore=shutil.ignore_patterns(".git"))


_DIFF_PATH = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", re.M)


def patched_files(patch: str) -> list[str]:
    """The repository paths a unified diff touches (both sides; /dev/null left out), in order."""
    paths = [m.group(1) for m in _DIFF_PATH.finditer(patch)]
    return list(dict.fromkeys(p for p in paths if p != "/dev/null"))


def junit_key(node_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit report gives a node id: `tests/test_a.py::TestB::test_c[1]` ->
    (`tests.test_a.TestB`, `test_c[1]`)."""
    path, *rest = node_id.split("::")
    module = path[:-3] if path.endswith(".py") else path
    if not rest:
        return module.replace("/", "."), ""
    return ".".join([module.replace("/", "."), *rest[:-1]]), rest[-1]
