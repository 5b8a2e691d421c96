"""Environment plugins: settings that outside packages bring, beside the built-in ones.

A plugin is a factory that takes a `PluginContext` and returns a `TaskSource` (`envs.base`). It is found in two
ways, the second overriding the first for the same name:
- an installed distribution declares an entry point in the group `openclaw_rl.envs`
  (`myenv = "my_package.env:make_source"` under `[project.entry-points."openclaw_rl.envs"]`);
- the settings name it: `[envs.plugins.myenv]` with `factory = "my_package.env:make_source"`.
The plugin's own settings are the other keys of `[envs.plugins.<name>]` (`PluginContext.options`), beside the
ones every setting has (`max_steps`, `prm_votes`, `samples_per_task`, ...).

A plugin that cannot be imported, whose factory raises, or whose source or environments break the protocol
raises `PluginError` naming the plugin; nothing else is affected (each setting is loaded on first use).
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from envs.base import Action, Environment, Observation, TaskInfo, TaskSource, UnknownTask
from openclaw_rl.settings import PLUGIN_NAME, Settings

log = structlog.get_logger(__name__)

ENTRY_POINT_GROUP = "openclaw_rl.envs"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class PluginError(RuntimeError):
    """An environment plugin that cannot be loaded or breaks the protocol (the message names it)."""


@dataclass(frozen=True)
class PluginSpec:
    name: str
    target: str
    """`module:attribute` of the factory."""
    origin: str
    """Where it was declared, for messages: an entry point of a distribution, or the settings."""


@dataclass(frozen=True)
class PluginContext:
    """What a plugin's factory is given."""

    name: str
    """The setting's name (its episodes, task ids and sample stream carry it)."""
    max_steps: int
    """The setting's step limit (`envs.plugins.<name>.max_steps`): the default for tasks without their own."""
    options: dict[str, Any] = field(default_factory=dict)
    """The plugin's own keys of `[envs.plugins.<name>]`."""
    data_dir: Path = Path(".")
    """The stack's data directory: a place for the plugin's own files (`<data_dir>/envs/<name>`, say)."""
    settings: Settings | None = None
    """Everything else, for a plugin that needs it."""


def discover(settings: Settings, builtin: set[str] | frozenset[str] = frozenset()) -> dict[str, PluginSpec]:
    """Every plugin by name: installed entry points, then the settings' `factory` entries over them.

    An entry point whose name is not a valid setting name or shadows a built-in setting is skipped with a warning
    (a package cannot take `terminal` over); the settings' names are validated where they are read."""
    found: dict[str, PluginSpec] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep.dist, "name", None) or "an installed package"
        if not PLUGIN_NAME.fullmatch(ep.name) or ep.name in builtin:
            log.warning("env_plugin_skipped", plugin=ep.name, distribution=dist, why="invalid or built-in name")
            continue
        found[ep.name] = PluginSpec(ep.name, ep.value, f"entry point of {dist}")
    for name, cfg in settings.envs.plugins.items():
        if cfg.factory:
            found[name] = PluginSpec(name, cfg.factory, f"envs.plugins.{name}.factory")
    return found


def load(spec: PluginSpec, settings: Settings) -> TaskSource:
    """The plugin's task source, checked against the protocol (raises `PluginError`)."""
    factory = _resolve(spec)
    cfg = settings.envs.plugin(spec.name)
    context = PluginContext(
        name=spec.name,
        max_steps=cfg.max_steps,
        options=dict(cfg.model_extra or {}),
        data_dir=settings.data_dir,
        settings=settings,
    )
    try:
        source = factory(context)
    except Exception as exc:
        raise PluginError(f"{_who(spec)}: its factory {spec.target} raised {type(exc).__name__}: {exc}") from exc
    missing = [m for m in ("tasks", "make") if not callable(getattr(source, m, None))]
    if missing:
        raise PluginError(
            f"{_who(spec)}: its factory returned {type(source).__name__}, not a TaskSource (no {_calls(missing)})"
        )
    return CheckedSource(spec, source)


def _resolve(spec: PluginSpec) -> Any:
    if not _TARGET.fullmatch(spec.target):
        raise PluginError(f"{_who(spec)}: {spec.target!r} is not module:attribute")
    module_name, _, attr = spec.target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # a plugin's import may fail in any way; it must not take the pool down
        raise PluginError(f"{_who(spec)}: cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise PluginError(f"{_who(spec)}: {module_name} has no {attr}")
    if not callable(obj):
        raise PluginError(f"{_who(spec)}: {spec.target} is not callable")
    return obj


def _calls(names: list[str]) -> str:
    return ", ".join(f"{n}()" for n in names)


def _who(spec: PluginSpec) -> str:
    return f"environment plugin {spec.name!r} ({spec.origin})"


class CheckedSource:
    """A plugin's TaskSource whose answers are checked: a broken plugin gets a `PluginError` naming it, never a
    crash deeper in the pool (a `TaskInfo` of the wrong setting, an environment missing a method)."""

    def __init__(self, spec: PluginSpec, inner: Any):
        self.spec = spec
        self.inner = inner
        self.setting = spec.name

    def tasks(self) -> list[TaskInfo]:
        rows = self._call("tasks()", self.inner.tasks)
        try:
            tasks = [TaskInfo.model_validate(r if isinstance(r, dict) else _dump(r)) for r in rows]
        except (TypeError, ValidationError) as exc:
            raise PluginError(f"{_who(self.spec)}: tasks() did not return TaskInfo rows: {exc}") from None
        # The setting a row names is this plugin's, whatever the plugin wrote: ids stay unique across settings.
        return [t.model_copy(update={"setting": self.setting}) for t in tasks]

    def make(self, task_id: str, sandboxes: Any) -> Environment:
        try:
            env = self._call(f"make({task_id!r})", self.inner.make, task_id, sandboxes, passthrough=(LookupError,))
        except LookupError as exc:  # the plugin's own "no such task" (UnknownTask, KeyError): the pool's 404
            raise UnknownTask(str(exc)) from exc
        missing = [m for m in ("reset", "tools", "step", "outcome", "close") if not callable(getattr(env, m, None))]
        if missing:
            raise PluginError(f"{_who(self.spec)}: make() returned an environment without {_calls(missing)}")
        return CheckedEnvironment(self.spec, env)

    def _call(self, what: str, fn, *args, passthrough: tuple[type[BaseException], ...] = ()):
        try:
            return fn(*args)
        except passthrough:
            raise
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(f"{_who(self.spec)}: {what} raised {type(exc).__name__}: {exc}") from exc


class CheckedEnvironment:
    """One episode's environment from a plugin, its answers checked against `envs.base`."""

    def __init__(self, spec: PluginSpec, inner: Any):
        self.spec = spec
        self.inner = inner
        self.setting = spec.name

    def reset(self) -> list[dict[str, Any]]:
        messages = self.inner.reset()
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
            raise PluginError(f"{_who(self.spec)}: reset() must return OpenAI messages (dicts with a role)")
        return messages

    def tools(self) -> list[dict[str, Any]]:
        tools = self.inner.tools()
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise PluginError(f"{_who(self.spec)}: tools() must return a list of OpenAI tool definitions")
        return tools

    def step(self, action: Action) -> Observation:
        obs = self.inner.step(action)
        try:
            return Observation.model_validate(obs if isinstance(obs, dict) else _dump(obs))
        except (TypeError, ValidationError) as exc:
            raise PluginError(f"{_who(self.spec)}: step() did not return an Observation: {exc}") from None

    def outcome(self) -> float:
        value = self.inner.outcome()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise PluginError(f"{_who(self.spec)}: outcome() returned {value!r}, not a finite number")
        return float(value)

    def close(self) -> None:
        self.inner.close()


def _dump(obj: Any) -> dict:
    if isinstance(obj, BaseModel):  # another pydantic model of the same shape (a plugin's own copy of the types)
        return obj.model_dump()
    raise TypeError(f"got {type(obj).__name__}")
