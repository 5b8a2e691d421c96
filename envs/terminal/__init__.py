"""The terminal general-agent setting: shell tasks in a sandbox, checked by their own pytest tests."""

from envs.terminal.env import TaskSetupFailed, TerminalEnv
from envs.terminal.source import BUILTIN_TASKS, TerminalTasks
from envs.terminal.task import MalformedTask, TerminalTask, load_task

__all__ = [
    "BUILTIN_TASKS",
    "MalformedTask",
    "TaskSetupFailed",
    "TerminalEnv",
    "TerminalTask",
    "TerminalTasks",
    "load_task",
]
