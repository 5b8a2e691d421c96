"""The gui setting's task set: every MiniWoB++ task the `miniwob` package ships, each runnable with any seed.

One source lives per env worker (the pool caches it), and so does its one
browser, started on the first episode and replaced after a crash. Screenshots go
to `<data_dir>/gui/screens/<task>-s<seed>-<id>/`; folders older than the
episode data's lifetime in Redis (which names them) are pruned now and then.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from envs.base import Environment, TaskInfo
from envs.gui.browser import Browser
from envs.gui.env import GuiEnv
from envs.gui.task import TESTED, parse_task_id, task_names
from openclaw_rl.settings import GuiSettingConfig

log = structlog.get_logger(__name__)

PRUNE_EVERY_S = 3600.0


class GuiTasks:
    setting = "gui"

    def __init__(self, config: GuiSettingConfig, screens_dir: Path, keep_screens_s: float = 7 * 24 * 3600):
        self.config = config
        self.screens_dir = Path(screens_dir)
        self.keep_screens_s = keep_screens_s
        self.browser = Browser(config.chromium, config.chromedriver)
        self._pruned = 0.0
        self._lock = threading.Lock()

    def tasks(self) -> list[TaskInfo]:
        return [
            TaskInfo(
                setting=self.setting,
                task_id=name,
                title=f"MiniWoB++ {name} (seed 0; {name}/<seed> for others)",
                category="tested" if name in TESTED else "miniwob",
                max_steps=self.config.max_steps,
            )
            for name in task_names()
        ]

    def make(self, task_id: str, sandboxes: Any = None) -> Environment:
        """A fresh episode of `task_id` (`name` or `name/seed`); the browser is shared (sandboxes are unused)."""
        task = parse_task_id(task_id)
        self._prune()
        return GuiEnv(task, self.browser, self.config, self.screens_dir)

    def close(self) -> None:
        self.browser.close()

    def _prune(self) -> None:
        now = time.time()
        with self._lock:
            if now - self._pruned < PRUNE_EVERY_S:
                return
            self._pruned = now
        if not self.screens_dir.is_dir():
            return
        for folder in self.screens_dir.iterdir():
            try:
                if folder.is_dir() and now - folder.stat().st_mtime > self.keep_screens_s:
                    shutil.rmtree(folder, ignore_errors=True)
            except OSError:
                pass
