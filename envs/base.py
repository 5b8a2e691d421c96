"""What every general-agent environment provides: tasks, tools, reset, step, outcome, close.

An environment instance lives on one env worker for its whole episode. The
episode workflow never sees it: it sends the policy's parsed action to
`env_step` and gets back an observation (full text in Redis, a summary in the
history). Everything here is plain data so activities can store it.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


class TaskInfo(BaseModel):
    """One task of a setting, as `openclaw-rl episodes tasks` lists it."""

    setting: str
    task_id: str
    title: str = ""
    """A one-line description (the instruction's first line, clipped)."""
    category: str = ""
    max_steps: int | None = None
    """None: the setting's step limit."""


class ToolCallAction(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Action(BaseModel):
    """The policy's step, parsed: its text and its tool calls (OpenAI/Qwen format)."""

    text: str = ""
    """The assistant's content (reasoning removed), which may hold a final answer."""
    tool_calls: list[ToolCallAction] = Field(default_factory=list)
    parse_error: str | None = None
    """A tool call that could not be parsed (bad JSON, unknown shape): the env reports it, never crashes."""


class ToolResult(BaseModel):
    call_id: str
    name: str
    content: str
    """What the agent reads back (truncated by the env to a sensible length)."""
    exit_code: int | None = None
    error: bool = False


class Observation(BaseModel):
    """The next state s_{t+1} after one action."""

    tool_results: list[ToolResult] = Field(default_factory=list)
    """One per tool call, in order: sent back as `tool` messages."""
    user_message: str | None = None
    """A message sent as the user (an error about the action's format, or the next user turn of a multi-turn task)."""
    done: bool = False
    """The episode ends after this step (the agent submitted, answered, or the task has no more turns)."""
    done_reason: Literal["submitted", "answered", "no_more_turns", ""] = ""
    screenshot: str | None = None
    """A screenshot of the state after the action (gui: a PNG path in the data directory; never sent to Temporal)."""

    def text(self) -> str:
        """The observation as the judge and the logs read it."""
        parts = [
            f"[{r.name} exit={r.exit_code}] {r.content}" if r.exit_code is not None else f"[{r.name}] {r.content}"
            for r in self.tool_results
        ]
        if self.user_message:
            parts.append(f"[user] {self.user_message}")
        return "\n".join(parts)


class Environment(Protocol):
    """One episode's environment on one env worker.

    Methods may block on the sandbox: activities call them off the event loop.
    """

    setting: str

    def reset(self) -> list[dict[str, Any]]:
        """Prepare the task (workspace, state); return the opening messages (system and user) in OpenAI format."""
        ...

    def tools(self) -> list[dict[str, Any]]:
        """The OpenAI tool definitions the policy may call."""
        ...

    def step(self, action: Action) -> Observation: ...

    def outcome(self) -> float:
        """The task's verdict once the episode is over.

        Terminal: the fraction of checker tests passed; tool-call: 1 or 0.
        """
        ...

    def close(self) -> None:
        """Release everything (workspace, processes). Safe to call twice."""
        ...


class Shell(Protocol):
    """An environment with a workspace an outside agent may run commands in (client-driven episodes' `exec`):
    optional, beside `Environment`. Returns (exit code, output)."""

    def run_command(self, command: str) -> tuple[int, str]: ...


class TaskSource(Protocol):
    """A setting's task set: listing and building environments."""

    setting: str

    def tasks(self) -> list[TaskInfo]: ...

    def make(self, task_id: str, sandboxes: Any) -> Environment:
        """A fresh environment for `task_id` (unknown id: `UnknownTask`).

        `sandboxes` is the worker's `envs.sandbox.SandboxPool`.
        """
        ...


class UnknownTask(LookupError):
    pass


class EnvCrashed(RuntimeError):
    """What the environment runs on died mid-episode (a crashed browser): this attempt of the episode is over.

    The env pool reports it as a lost environment, so the episode starts over on a fresh one."""
