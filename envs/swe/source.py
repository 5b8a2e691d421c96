"""The SWE setting's task set: every instance of a list of instance files (or folders of them).

Files are reread on every call, so an instance added to a file is picked up
without a restart; a broken line is skipped with a warning instead of taking
the whole setting down. The first instance with a given id wins.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from envs.base import TaskInfo, UnknownTask
from envs.sandbox import SandboxPool
from envs.swe.env import SweEnv
from envs.swe.task import SweInstance, load_instances

log = structlog.get_logger(__name__)

BUILTIN_DIR = Path(__file__).resolve().parent / "tasks"
BUILTIN_INSTANCES = [BUILTIN_DIR / "handwritten.jsonl", BUILTIN_DIR / "humaneval.jsonl"]
"""The shipped tasks: hand-written multi-file repositories, then those `python -m envs.swe.build` makes."""


class SweTasks:
    setting = "swe"

    def __init__(self, task_dirs: list[Path] | None = None, max_steps: int = 20):
        self.task_dirs = [Path(d) for d in (task_dirs if task_dirs is not None else BUILTIN_INSTANCES)]
        self.max_steps = max_steps
        self.skipped: dict[str, str] = {}
        """The instance lines the last scan could not use, with why."""

    def tasks(self) -> list[TaskInfo]:
        return [
            TaskInfo(
                setting=self.setting,
                task_id=i.instance_id,
                title=i.title,
                category=i.category,
                max_steps=self.max_steps,
            )
            for i in self._scan().values()
        ]

    def instances(self) -> list[SweInstance]:
        """Every usable instance, in file order (one scan)."""
        return list(self._scan().values())

    def get(self, task_id: str) -> SweInstance:
        inst = self._scan().get(task_id)
        if inst is None:
            raise UnknownTask(f"no swe task {task_id!r} in {', '.join(map(str, self.task_dirs))}")
        return inst

    def make(self, task_id: str, sandboxes: SandboxPool) -> SweEnv:
        return SweEnv(self.get(task_id), sandboxes, max_steps=self.max_steps)

    def _files(self) -> list[Path]:
        files: list[Path] = []
        for d in self.task_dirs:
            if d.is_file():
                files.append(d)
            elif d.is_dir():
                files += sorted(p for p in d.glob("*.jsonl") if p.is_file())
            else:
                log.warning("swe.task_path_missing", path=str(d))
        return files

    def _scan(self) -> dict[str, SweInstance]:
        found: dict[str, SweInstance] = {}
        skipped: dict[str, str] = {}
        for f in self._files():
            try:
                instances, bad = load_instances(f)
            except (OSError, UnicodeDecodeError) as e:
                skipped[str(f)] = str(e)
                continue
            skipped.update(bad)
            for inst in instances:
                if inst.instance_id in found:
                    skipped[f"{f}:{inst.instance_id}"] = (
                        f"duplicate instance id (kept {found[inst.instance_id].source_file})"
                    )
                    continue
                found[inst.instance_id] = inst
        for where, why in skipped.items():
            if where not in self.skipped:
                log.warning("swe.instance_skipped", where=where, reason=why)
        self.skipped = skipped
        return found
