"""`verifiers` environments (PyPI `verifiers`, its classic API: 0.1.14) as an episode setting.

A verifiers environment is a dataset of prompts (with `answer`/`info` for scoring), a parser, a rubric, and its
own rollout: `MultiTurnEnv.rollout` asks a model (its `vf.Client`), adds the reply to the trajectory, checks its
stop conditions (`max_turns`, `final_env_response`, a ToolEnv answer without tool calls, ...) and asks
`env_response` for the next turn's messages (a ToolEnv runs the model's tool calls there). Here the environment's
own rollout runs unchanged, with our agent in the model's seat: its `vf.Client` is the episode (`_Seat`), so each
of the policy's steps is one model reply of that rollout, what `env_response` returns is the step's next state
(tool messages as tool results, user messages as the user's turn), and when the rollout stops the environment's
rubric scores it (`Environment.run_rollout`: `rubric.score_rollout` with the environment's parser). The rubric's
reward is the episode's outcome.

A setting names it in its plugin settings (the factory is this module's `source`):

    [envs.plugins.arith]
    factory = "envs.verifiers_adapter:source"
    environment = "vf_arith"            # vf.load_environment("vf_arith", **args): the installed environment module
    args = { kind = "tools" }           # its load_environment() keyword arguments
    split = "eval"                      # its eval dataset (verifiers falls back to the train one), or "train"
    limit = 100                         # the first N rows only (tasks row/0 .. row/99)

The tools the policy may call are the environment's own tool definitions (a ToolEnv's python functions, as
verifiers describes them); the opening messages are the row's prompt (with the environment's system prompt).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal as _signal
import threading
import time
import types
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

try:
    import verifiers as vf
    from verifiers.clients import OpenAIChatCompletionsClient
    from verifiers.envs import environment as vf_environment
except ImportError as exc:  # the plugin loader reports this message as the setting's error
    raise ImportError(
        f"verifiers settings need the verifiers package: pip install 'openclaw-rl[verifiers]' ({exc})"
    ) from exc

from envs.base import Action, Observation, TaskInfo, ToolResult, UnknownTask
from envs.plugins import PluginContext, PluginError

_LOAD_LOCK = threading.Lock()


class VerifiersOptions(BaseModel):
    """`[envs.plugins.<name>]`'s own keys for a verifiers setting."""

    model_config = ConfigDict(extra="forbid")

    environment: str = Field(min_length=1)
    """The environment's id as `vf.load_environment` takes it: the module that defines `load_environment()`."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Its `load_environment(**args)` keyword arguments."""
    split: Literal["eval", "train"] = "eval"
    """Which dataset's rows are the tasks: `eval` (what `vf-eval` runs; the train set if it has none) or `train`."""
    limit: int | None = Field(None, ge=1)
    """The first `limit` rows only."""
    model: str = "policy"
    """The model name the environment's rollout state carries (`state["model"]`)."""


def source(context: PluginContext) -> VerifiersTasks:
    """The plugin factory (`factory = "envs.verifiers_adapter:source"`)."""
    try:
        options = VerifiersOptions.model_validate(context.options)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "options"
        raise ValueError(f"envs.plugins.{context.name}.{where}: {err['msg']}") from None
    return VerifiersTasks(context.name, options)


def load(environment: str, args: dict[str, Any]) -> Any:
    """`vf.load_environment(environment, **args)`, checked to be a verifiers Environment.

    verifiers' Environment installs SIGINT/SIGTERM handlers of its own when it is built (and cannot from a thread
    other than the main one): the process's handlers are left as they are while it is built here."""
    with _LOAD_LOCK:
        saved = vf_environment.signal
        vf_environment.signal = _KeepSignals
        try:
            env = vf.load_environment(environment, **args)
        except RuntimeError as exc:  # verifiers sets env_id on what load_environment() returned
            cause = exc.__cause__
            if isinstance(cause, AttributeError) and "env_id" in str(cause):
                raise TypeError(f"{environment}.load_environment() did not return a vf.Environment: {cause}") from exc
            raise
        finally:
            vf_environment.signal = saved
    if not isinstance(env, vf.Environment):
        raise TypeError(f"{environment}.load_environment() did not return a vf.Environment: {type(env).__name__}")
    return env


_KeepSignals = types.SimpleNamespace(
    signal=lambda *a, **kw: None,
    SIGINT=_signal.SIGINT,
    SIGTERM=_signal.SIGTERM,
    default_int_handler=_signal.default_int_handler,
)


class VerifiersTasks:
    def __init__(self, setting: str, options: VerifiersOptions):
        self.setting = setting
        self.options = options
        self.env = load(options.environment, options.args)  # now: a wrong name is a plugin error at start
        dataset = self.env.get_eval_dataset() if options.split == "eval" else self.env.get_dataset()
        rows = dataset.to_list()
        self.rows: list[dict[str, Any]] = rows[: options.limit] if options.limit else rows

    def tasks(self) -> list[TaskInfo]:
        return [TaskInfo(setting=self.setting, task_id=f"row/{i}", title=_title(r)) for i, r in enumerate(self.rows)]

    def make(self, task_id: str, sandboxes: Any) -> VerifiersEpisode:
        prefix, _, index = task_id.partition("/")
        if prefix != "row" or not index.isdigit() or int(index) >= len(self.rows):
            raise UnknownTask(task_id)
        return VerifiersEpisode(self.setting, self.env, self.rows[int(index)], self.options.model)


def _title(row: dict[str, Any]) -> str:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt.strip().splitlines()[0][:60] if prompt.strip() else ""
    users = [m.get("content") for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    text = users[-1] if users and isinstance(users[-1], str) else ""
    return text.strip().splitlines()[0][:60] if text.strip() else ""


class _EpisodeOver(Exception):
    """Told to the environment's rollout when our episode ends before it stops on its own (the step limit)."""


class VerifiersEpisode:
    """One rollout of the environment, our policy in the model's seat.

    The rollout runs on the episode's own event loop, driven from whichever thread calls reset/step/outcome (the
    env pool runs one call of an episode at a time): each call runs the loop until the rollout asks the model
    again, or stops."""

    def __init__(self, setting: str, env: Any, row: dict[str, Any], model: str):
        self.setting, self.env, self.row, self.model = setting, env, row, model
        self.loop = asyncio.new_event_loop()
        self.seat = _Seat(self.loop)
        self.rollout: asyncio.Task | None = None
        self.output: dict[str, Any] | None = None
        self.last_prompt: list[Any] = []
        self.native_tools: list[dict[str, Any]] = []
        self.closed = False

    # ---- the protocol ----------------------------------------------------------------------------------------
    def reset(self) -> list[dict[str, Any]]:
        self.rollout = self.loop.create_task(self._run())
        prompt = self._until_asked()
        if prompt is None:
            raise RuntimeError(f"verifiers environment of setting {self.setting!r} stopped before its first turn")
        self.last_prompt = prompt
        self.native_tools = self._native_tools(self.seat.tools)
        return self._native(prompt)

    def tools(self) -> list[dict[str, Any]]:
        return self.native_tools

    def step(self, action: Action) -> Observation:
        if action.parse_error:  # not a reply the environment can take: the agent is told, the rollout waits
            return Observation(user_message=f"Your tool call could not be parsed: {action.parse_error}")
        if self.output is not None or self.rollout is None:
            return Observation(done=True, done_reason="no_more_turns")
        sent = len(self.last_prompt) + 1  # the prompt the agent answered, and its answer
        self.seat.answer(action)
        prompt = self._until_asked()
        if prompt is not None:  # the environment's response, then the model's turn again
            self.last_prompt = prompt
            return self._observation(action, prompt[sent:])
        # the rollout stopped (and was scored): anything the environment said last is the final state
        final = self._final_messages()
        obs = self._observation(action, final)
        reason = "answered" if not action.tool_calls else "no_more_turns"
        return obs.model_copy(update={"done": True, "done_reason": reason})

    def outcome(self) -> float:
        if self.output is None:
            if self.rollout is None:
                raise RuntimeError(f"setting {self.setting!r}: outcome() before reset()")
            self.seat.end(_EpisodeOver("the episode ended before the environment's rollout stopped"))
            self._until_asked()
            if self.output is None:
                raise RuntimeError(f"setting {self.setting!r}: the environment's rollout did not stop")
        return float(self.output["reward"])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.rollout is not None and not self.rollout.done():
            self.rollout.cancel()
            try:
                self.loop.run_until_complete(asyncio.gather(self.rollout, return_exceptions=True))
            except RuntimeError:
                pass
        self.loop.close()

    # ---- the rollout -----------------------------------------------------------------------------------------
    async def _run(self) -> None:
        """verifiers' own rollout and scoring (`Environment.run_rollout`: rollout, rubric, cleanup)."""
        failures = _RubricFailures(self.loop)
        logging.getLogger("verifiers.rubrics").addHandler(failures)
        try:
            if self.env.requires_group_rollouts:  # group reward functions: a group of one
                (out,) = await self.env.run_group([dict(self.row)], self.seat, self.model, {})
            else:
                out = await self.env.run_rollout(dict(self.row), self.seat, self.model, {})
        finally:
            logging.getLogger("verifiers.rubrics").removeHandler(failures)
        if failures.messages:  # verifiers scores a reward function that raises as 0: an outcome we must not train on
            raise RubricFailed(
                f"environment plugin {self.setting!r} (verifiers environment {self.env.env_id!r}): its rubric raised: "
                + "; ".join(failures.messages)
            )
        self.output = dict(out)

    def _until_asked(self) -> list[Any] | None:
        """Run the rollout until it asks the model (the prompt) or stops (None; its errors raised here)."""
        assert self.rollout is not None
        asked = self.seat.next_question()
        self.loop.run_until_complete(asyncio.wait({self.rollout, asked}, return_when=asyncio.FIRST_COMPLETED))
        if asked.done():
            return asked.result()
        asked.cancel()
        exc = self.rollout.exception()
        if isinstance(exc, RubricFailed):
            raise exc
        if exc is not None:  # not a verifiers error (those end the rollout and are scored): a broken environment
            raise PluginError(
                f"environment plugin {self.setting!r} (verifiers environment {self.env.env_id!r}): its rollout raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return None

    def _final_messages(self) -> list[Any]:
        """What the environment said after the agent's last reply (its `final_env_response`), if anything."""
        completion = (self.output or {}).get("completion") or []
        for i in range(len(completion) - 1, -1, -1):
            if _role(completion[i]) == "assistant":
                return list(completion[i + 1 :])
        return []

    def _observation(self, action: Action, messages: list[Any]) -> Observation:
        names = {c.id: c.name for c in action.tool_calls}
        results, said = [], []
        for m in self._native(messages):
            if m.get("role") == "tool" and m.get("tool_call_id") in names:
                text = _text(m.get("content"))
                results.append(ToolResult(call_id=m["tool_call_id"], name=names[m["tool_call_id"]], content=text))
            else:
                said.append(_text(m.get("content")))
        answered = {r.call_id for r in results}
        for c in action.tool_calls:  # one result per call: a call the environment never ran (its rollout stopped)
            if c.id not in answered:
                results.append(
                    ToolResult(call_id=c.id, name=c.name, content="not run: the episode is over", error=True)
                )
        order = {c.id: i for i, c in enumerate(action.tool_calls)}
        results.sort(key=lambda r: order[r.call_id])
        return Observation(tool_results=results, user_message="\n\n".join(s for s in said if s) or None)

    def _native(self, messages: list[Any]) -> list[dict[str, Any]]:
        out, _ = self.loop.run_until_complete(self.seat.to_native_prompt(list(messages)))
        return [dict(m) for m in out]

    def _native_tools(self, tools: list[Any] | None) -> list[dict[str, Any]]:
        return [dict(t) for t in self.loop.run_until_complete(self.seat.to_native_tools(tools)) or []]


class RubricFailed(PluginError):
    """The environment's rubric raised while scoring: no outcome (the episode fails with this error)."""


class _RubricFailures(logging.Handler):
    """verifiers logs (and scores 0) a reward function that raises; this episode's failures are kept here: the
    records logged while its own event loop runs, on whichever thread drives it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.ERROR)
        self.loop = loop
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            ours = asyncio.get_running_loop() is self.loop
        except RuntimeError:  # logged outside any event loop: another episode's thread
            ours = False
        if ours:
            self.messages.append(record.getMessage())


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else getattr(message, "role", None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


class _Stopped(vf.Error):
    """The rollout's model is gone (our episode ended first): verifiers stops the rollout on this error and scores."""


class _Seat(OpenAIChatCompletionsClient):
    """The model of the environment's rollout: our episode. `get_response` hands the prompt to the episode and
    returns the policy's step as the model's reply; the OpenAI message conversion is verifiers' own."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        super().__init__(None)  # no HTTP client: nothing is sent anywhere
        self.loop = loop
        self.asked: asyncio.Future | None = None
        self.reply: asyncio.Future | None = None
        self.tools: list[Any] | None = None
        self.ended: BaseException | None = None

    def next_question(self) -> asyncio.Future:
        self.asked = self.loop.create_future()
        return self.asked

    def answer(self, action: Action) -> None:
        assert self.reply is not None and not self.reply.done()
        self.reply.set_result(action)

    def end(self, exc: BaseException) -> None:
        self.ended = exc
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(exc)

    async def get_response(self, prompt, model, sampling_args, tools=None, **kwargs) -> vf.Response:
        if self.ended is not None:
            raise _Stopped(str(self.ended))
        self.tools = tools
        self.reply = self.loop.create_future()
        if self.asked is not None and not self.asked.done():
            self.asked.set_result(list(prompt))
        try:
            action: Action = await self.reply
        except _EpisodeOver as exc:
            raise _Stopped(str(exc)) from None
        calls = [
            vf.ToolCall(id=c.id, name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False))
            for c in action.tool_calls
        ]
        message = vf.ResponseMessage(
            content=action.text,
            tool_calls=calls or None,
            finish_reason="tool_calls" if calls else "stop",
            is_truncated=False,
        )
        return vf.Response(
            id=f"episode-{uuid.uuid4().hex[:12]}", created=int(time.time()), model=model, message=message
        )
