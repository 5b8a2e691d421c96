"""OpenEnv environments (PyPI `openenv-core`, import `openenv`) as an episode setting, in-process or over HTTP.

An OpenEnv environment is `reset(seed) -> Observation` and `step(Action) -> Observation`, with typed pydantic
actions and observations that carry `done` and `reward`. The policy drives it through one tool, `step`, whose
parameters are the action's JSON schema: each call is one `env.step`, its observation comes back as the tool's
result (JSON), and the episode ends when the environment says `done` (or the policy answers without a call).
The outcome is the rewards summed over the episode (`outcome = "last"`: the last one).

A setting names it in its plugin settings (the factory is this module's `source`):

    [envs.plugins.echo]
    factory = "envs.openenv_adapter:source"
    env = "my_envs.echo:EchoEnv"            # in-process: the Environment class (or a factory returning one)
    action = "my_envs.echo:EchoAction"      # ...and its Action class
    # url = "http://127.0.0.1:8011"         # or a running OpenEnv server (its WebSocket session at /ws)
    instruction = "Echo the word back."    # what the policy is told the task is
    seeds = 8                               # tasks `seed/0` .. `seed/7`: reset seeds
    outcome = "sum"                         # or "last"

Over HTTP the adapter holds one WebSocket session per episode (OpenEnv's HTTP /reset and /step are stateless:
each request gets a fresh environment), through OpenEnv's own client (`GenericEnvClient`).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from envs.base import Action, Observation, TaskInfo, ToolResult, UnknownTask
from envs.plugins import PluginContext

TOOL = "step"
OBSERVATION_CHARS = 8000
"""An observation longer than this is cut (with a note) before the policy reads it."""
_HIDDEN = {"done", "reward", "metadata"}
"""Observation fields the policy is not shown (the episode's own bookkeeping)."""


class OpenEnvOptions(BaseModel):
    """`[envs.plugins.<name>]`'s own keys for an OpenEnv setting."""

    model_config = ConfigDict(extra="forbid")

    env: str | None = None
    """`module:attribute` of the Environment class (or a zero-argument factory), run in the env worker."""
    action: str | None = None
    """`module:attribute` of its Action class (in-process)."""
    url: str | None = None
    """A running OpenEnv server instead (http://host:port)."""
    instruction: str = "Act in the environment by calling the `step` tool; stop when it says the episode is done."
    seeds: int = Field(8, ge=1, le=100_000)
    outcome: str = Field("sum", pattern="^(sum|last)$")

    @model_validator(mode="after")
    def _one_way(self) -> OpenEnvOptions:
        if (self.url is None) == (self.env is None):
            raise ValueError("name either `env` (with `action`) for an in-process environment, or `url` for a server")
        if self.env is not None and self.action is None:
            raise ValueError("an in-process environment needs its `action` class too")
        return self


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"{target!r} is not `module:attribute`")
    return getattr(importlib.import_module(module), attr)


def source(context: PluginContext) -> OpenEnvTasks:
    """The plugin factory (`factory = "envs.openenv_adapter:source"`)."""
    try:
        options = OpenEnvOptions.model_validate(context.options)
    except ValidationError as exc:
        raise ValueError(f"envs.plugins.{context.name}: {exc.errors()[0]['msg']}") from None
    return OpenEnvTasks(context.name, options)


class OpenEnvTasks:
    def __init__(self, setting: str, options: OpenEnvOptions):
        self.setting = setting
        self.options = options
        if options.env is not None:  # import now: a wrong name is a plugin error at start, not per episode
            self._env_factory = _load(options.env)
            self._action_cls = _load(options.action or "")
            self.action_schema = self._action_cls.model_json_schema()
        else:
            self.action_schema = _server_schema(options.url or "")

    def tasks(self) -> list[TaskInfo]:
        first = self.options.instruction.splitlines()[0][:60]
        return [TaskInfo(setting=self.setting, task_id=f"seed/{i}", title=first) for i in range(self.options.seeds)]

    def make(self, task_id: str, sandboxes: Any) -> OpenEnvEpisode:
        prefix, _, seed = task_id.partition("/")
        if prefix != "seed" or not seed.isdigit() or int(seed) >= self.options.seeds:
            raise UnknownTask(task_id)
        if self.options.env is not None:
            session: _Session = _InProcess(self._env_factory(), self._action_cls)
        else:
            session = _Remote(self.options.url or "")
        return OpenEnvEpisode(self.setting, int(seed), session, self.options, self.action_schema)


class OpenEnvEpisode:
    def __init__(self, setting: str, seed: int, session: _Session, options: OpenEnvOptions, schema: dict):
        self.setting, self.seed, self.session, self.options = setting, seed, session, options
        self.schema = schema
        self.rewards: list[float] = []
        self.done = False

    def reset(self) -> list[dict[str, Any]]:
        first = self.session.reset(self.seed)
        self._take(first)
        return [
            {"role": "system", "content": self.options.instruction},
            {"role": "user", "content": f"The environment's first observation:\n{_shown(first)}"},
        ]

    def tools(self) -> list[dict[str, Any]]:
        params = {k: v for k, v in self.schema.items() if k in ("type", "properties", "required", "$defs")}
        params["properties"] = {k: v for k, v in params.get("properties", {}).items() if k != "metadata"}
        return [
            {
                "type": "function",
                "function": {"name": TOOL, "description": "Take one action in the environment.", "parameters": params},
            }
        ]

    def step(self, action: Action) -> Observation:
        if action.parse_error:
            return Observation(user_message=f"Your tool call could not be parsed: {action.parse_error}")
        if not action.tool_calls:
            return Observation(done=True, done_reason="answered")
        results = []
        for call in action.tool_calls:
            if self.done:
                results.append(
                    ToolResult(call_id=call.id, name=call.name, content="not run: the episode is done", error=True)
                )
                continue
            if call.name != TOOL:
                results.append(
                    ToolResult(
                        call_id=call.id,
                        name=call.name,
                        content=f"error: unknown tool {call.name!r}; call `{TOOL}`",
                        error=True,
                    )
                )
                continue
            try:
                obs = self.session.step(call.arguments)
            except (ValidationError, ValueError) as exc:  # an action the environment's schema refuses
                results.append(
                    ToolResult(call_id=call.id, name=call.name, content=f"error: invalid action: {exc}", error=True)
                )
                continue
            self._take(obs)
            results.append(ToolResult(call_id=call.id, name=call.name, content=_shown(obs)))
        if self.done:
            return Observation(tool_results=results, done=True, done_reason="no_more_turns")
        return Observation(tool_results=results)

    def outcome(self) -> float:
        if not self.rewards:
            return 0.0
        return self.rewards[-1] if self.options.outcome == "last" else float(sum(self.rewards))

    def close(self) -> None:
        self.session.close()

    def _take(self, obs: dict) -> None:
        if obs.get("reward") is not None:
            self.rewards.append(float(obs["reward"]))
        self.done = bool(obs.get("done"))


def _shown(obs: dict) -> str:
    text = json.dumps({k: v for k, v in obs.items() if k not in _HIDDEN}, ensure_ascii=False, default=str)
    if len(text) > OBSERVATION_CHARS:
        text = text[:OBSERVATION_CHARS] + f" ... [cut: {len(text) - OBSERVATION_CHARS} more characters]"
    return text


# ---- sessions: one environment instance per episode --------------------------------------------------------------
class _Session:
    def reset(self, seed: int) -> dict: ...
    def step(self, arguments: dict) -> dict: ...
    def close(self) -> None: ...


class _InProcess(_Session):
    def __init__(self, env: Any, action_cls: type[BaseModel]):
        self.env, self.action_cls = env, action_cls

    def reset(self, seed: int) -> dict:
        return _as_dict(self.env.reset(seed=seed))

    def step(self, arguments: dict) -> dict:
        return _as_dict(self.env.step(self.action_cls.model_validate(arguments)))

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


class _Remote(_Session):
    """OpenEnv's own client over its WebSocket session (one environment per connection)."""

    def __init__(self, url: str):
        try:
            from openenv.core import GenericEnvClient
        except ImportError as exc:
            raise ImportError(
                f"an OpenEnv server needs openenv-core: pip install 'openclaw-rl[openenv]' ({exc})"
            ) from exc

        self.client = GenericEnvClient(base_url=url).sync()
        self.client.__enter__()

    def reset(self, seed: int) -> dict:
        return _result(self.client.reset(seed=seed))

    def step(self, arguments: dict) -> dict:
        try:
            return _result(self.client.step(arguments))
        except RuntimeError as exc:  # the server refused the step (its client raises RuntimeError with the reason)
            raise ValueError(str(exc)) from None

    def close(self) -> None:
        self.client.__exit__(None, None, None)


def _as_dict(obs: Any) -> dict:
    return obs.model_dump() if isinstance(obs, BaseModel) else dict(obs)


def _result(r: Any) -> dict:
    """A client StepResult (observation, reward, done) as one observation dict."""
    obs = r.observation if isinstance(r.observation, dict) else _as_dict(r.observation)
    return {**obs, "reward": r.reward, "done": r.done}


def _server_schema(url: str) -> dict:
    import httpx

    try:
        r = httpx.get(f"{url.rstrip('/')}/schema", timeout=30)
        r.raise_for_status()
        return r.json()["action"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise ValueError(f"the OpenEnv server at {url} gave no action schema (GET /schema): {exc}") from None
