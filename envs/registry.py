"""Settings -> task sources, keyed by setting name (terminal, toolcall)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envs.base import TaskSource
from openclaw_rl.settings import Settings


def _terminal(settings: Settings) -> TaskSource:
    from envs.terminal.source import TerminalTasks

    shipped = Path(__file__).parent / "terminal" / "tasks"
    cfg = settings.envs.terminal
    return TerminalTasks([shipped, *cfg.task_dirs], max_steps=cfg.max_steps)


def _toolcall(settings: Settings) -> TaskSource:
    from envs.toolcall.source import ToolCallTasks

    return ToolCallTasks(max_steps=settings.envs.toolcall.max_steps)


# Imported on first use: a worker loads only the settings it serves.
SOURCES: dict[str, Callable[[Settings], TaskSource]] = {"terminal": _terminal, "toolcall": _toolcall}


class UnknownSetting(LookupError):
    pass


def task_source(setting: str, settings: Settings) -> TaskSource:
    try:
        factory = SOURCES[setting]
    except KeyError:
        raise UnknownSetting(f"unknown agent setting {setting!r}: one of {', '.join(SOURCES)}") from None
    return factory(settings)
