"""The terminal setting's task set: every task folder under a list of task directories.

Folders are rescanned on every call, so a task dropped into a directory is
picked up without a restart; a broken one is skipped with a warning instead of
taking the whole setting down.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from envs.base import TaskInfo, UnknownTask
from envs.sandbox import SandboxPool
from envs.terminal.env import TerminalEnv
from envs.terminal.task import MalformedTask, TerminalTask, load_task

log = structlog.get_logger(__name__)

BUILTIN_TASKS = Path(__file__).resolve().parent / "tasks"


class TerminalTasks:
    setting = "terminal"

    def __init__(self, task_dirs: list[Path] | None = None, max_steps: int = 10):
        self.task_dirs = [Path(d) for d in (task_dirs or [BUILTIN_TASKS])]
        self.max_steps = max_steps
        self.skipped: dict[Path, str] = {}
        """The task folders the last scan could not load, with why."""

    def tasks(self) -> list[TaskInfo]:
        return [
            TaskInfo(
                setting=self.setting,
                task_id=t.task_id,
                title=t.title,
                category=t.config.metadata.category,
                max_steps=t.config.agent.max_steps or self.max_steps,
            )
            for t in self._scan().values()
        ]

    def get(self, task_id: str) -> TerminalTask:
        """The task whose folder is named `task_id`, from the first directory where it loads: what a full scan
        would pick, reading one folder instead of all of them (thousands of generated tasks)."""
        task = None
        if task_id and "/" not in task_id and not task_id.startswith((".", "_")):
            for d in self.task_dirs:
                folder = d / task_id
                if folder.is_dir():
                    try:
                        task = load_task(folder)
                        break
                    except MalformedTask as e:
                        log.warning("terminal.task_skipped", path=str(folder), reason=str(e))
        if task is None:
            raise UnknownTask(f"no terminal task {task_id!r} in {', '.join(map(str, self.task_dirs))}")
        return task

    def make(self, task_id: str, sandboxes: SandboxPool) -> TerminalEnv:
        return TerminalEnv(self.get(task_id), sandboxes, max_steps=self.max_steps)

    def _scan(self) -> dict[str, TerminalTask]:
        """Task id -> task over all directories in order; an id seen twice keeps its first folder."""
        found: dict[str, TerminalTask] = {}
        skipped: dict[Path, str] = {}
        for d in self.task_dirs:
            if not d.is_dir():
                log.warning("terminal.task_dir_missing", path=str(d))
                continue
            for folder in sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
                try:
                    task = load_task(folder)
                except MalformedTask as e:
                    skipped[folder] = str(e)
                    log.warning("terminal.task_skipped", path=str(folder), reason=str(e))
                    continue
                if task.task_id in found:
                    skipped[folder] = f"duplicate task id {task.task_id!r} (kept {found[task.task_id].root})"
                    log.warning("terminal.task_skipped", path=str(folder), reason=skipped[folder])
                    continue
                found[task.task_id] = task
        self.skipped = skipped
        return found
