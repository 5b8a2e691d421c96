"""Settings -> task sources, keyed by setting name: the built-in ones, then environment plugins (`envs.plugins`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envs.base import TaskSource
from envs.plugins import PluginError, discover, load
from openclaw_rl.settings import AgentSettingConfig, Settings


def _terminal(settings: Settings) -> TaskSource:
    from envs.terminal.source import TerminalTasks

    shipped = Path(__file__).parent / "terminal" / "tasks"
    cfg = settings.envs.terminal
    return TerminalTasks([shipped, *cfg.task_dirs], max_steps=cfg.max_steps)


def _toolcall(settings: Settings) -> TaskSource:
    from envs.toolcall.source import ToolCallTasks

    cfg = settings.envs.toolcall
    return ToolCallTasks(math_count=cfg.math_count, bfcl=cfg.bfcl, max_steps=cfg.max_steps, tool_bonus=cfg.tool_bonus)


def _swe(settings: Settings) -> TaskSource:
    from envs.swe.source import BUILTIN_INSTANCES, SweTasks

    cfg = settings.envs.swe
    return SweTasks([*BUILTIN_INSTANCES, *cfg.task_dirs], max_steps=cfg.max_steps)


def _gui(settings: Settings) -> TaskSource:
    from envs.gui.source import GuiTasks

    return GuiTasks(
        settings.envs.gui,
        settings.data_dir / "gui" / "screens",
        keep_screens_s=settings.redis.data_ttl_s,
    )


# Imported on first use: a worker loads only the settings it serves.
SOURCES: dict[str, Callable[[Settings], TaskSource]] = {
    "terminal": _terminal,
    "toolcall": _toolcall,
    "swe": _swe,
    "gui": _gui,
}


class UnknownSetting(LookupError):
    pass


__all__ = ["SOURCES", "PluginError", "UnknownSetting", "available", "setting_config", "task_source"]


def available(settings: Settings) -> list[str]:
    """Every setting episodes can run: the built-in ones, then the plugins found (installed or in the settings)."""
    return [*SOURCES, *sorted(discover(settings, set(SOURCES)))]


def task_source(setting: str, settings: Settings) -> TaskSource:
    """The setting's task source (a plugin's is loaded here: `PluginError` if it is broken)."""
    if setting in SOURCES:
        return SOURCES[setting](settings)
    spec = discover(settings, set(SOURCES)).get(setting)
    if spec is None:
        raise UnknownSetting(f"unknown agent setting {setting!r}: one of {', '.join(available(settings))}")
    return load(spec, settings)


def setting_config(settings: Settings, setting: str) -> AgentSettingConfig:
    """How episodes of `setting` run (its `envs.<setting>` or `envs.plugins.<setting>`); unknown: `UnknownSetting`."""
    if setting not in SOURCES and setting not in discover(settings, set(SOURCES)):
        raise UnknownSetting(f"unknown agent setting {setting!r}: one of {', '.join(available(settings))}")
    return settings.envs.setting(setting)
