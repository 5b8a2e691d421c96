"""Env-pool activities: environments live in this worker's memory for the whole of their episode.

`env_open` runs on the shared env queue: whichever worker takes it builds the
environment and answers with its own task queue, where the episode sends every
later call. A worker that dies takes its environments with it; the episode
notices (nothing picks up its next call) and starts over elsewhere. Blocking
environment work runs in threads, with heartbeats, so the worker keeps serving.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import pool_metrics
from activities.heartbeat import heartbeating
from contracts.client_episodes import (
    ENV_EXEC,
    ENV_FINAL_ANSWER,
    ENV_TOOL,
    ClientExecResult,
    ClientToolResult,
    EnvExecInput,
    EnvFinalAnswerInput,
    EnvToolInput,
)
from contracts.episodes import (
    ENV_CLOSE,
    ENV_FINISH,
    ENV_OPEN,
    ENV_OUTCOME,
    ENV_STEP,
    LIST_TASKS,
    EnvOpened,
    EnvOpenInput,
    EnvRef,
    EnvStepInput,
    EnvStepResult,
    ListTasksInput,
    Outcome,
    TaskList,
)
from contracts.errors import ErrorType
from contracts.summary import clip
from envs.agent_turn import observation_messages
from envs.base import Action, EnvCrashed, Environment, Observation, TaskSource, ToolCallAction, UnknownTask
from envs.registry import PluginError, UnknownSetting, task_source
from envs.sandbox import SandboxPool, WorkspaceUnreachable
from openclaw_rl.settings import Settings
from store.client import Store
from store.episodes import EpisodeDataMissing, EpisodeOpening, StepObservation

log = structlog.get_logger(__name__)

HEARTBEAT_S = 2.0
FINISHED_KEPT = 1024
IDLE_CLOSE_S = 3600.0
"""An environment no call has touched for this long belongs to an episode that is gone: it is closed."""


@dataclass
class _Held:
    env: Environment
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_step: int = -1
    last_result: EnvStepResult | None = None
    outcome: Outcome | None = None
    touched: float = field(default_factory=time.monotonic)
    last_call: tuple[str, ClientToolResult] | None = None
    """A client-driven episode's last tool call (id, result): a retried call is answered, not run again."""
    last_exec: tuple[str, ClientExecResult] | None = None


class EnvActivities:
    def __init__(self, settings: Settings, worker_queue: str):
        self.settings = settings
        self.worker_queue = worker_queue
        self.store = Store.from_settings(settings)
        sb = settings.envs.sandbox
        self.sandboxes = SandboxPool(sb.root, sb.limits, sb.mode)
        self._sources: dict[str, TaskSource] = {}
        self._step_limits: dict[tuple[str, str], int | None] = {}
        self._held: dict[str, _Held] = {}
        self._finished: OrderedDict[str, Outcome] = OrderedDict()
        """Outcomes of environments `env_finish` closed, newest last (FINISHED_KEPT): a retry whose first result
        never reached Temporal gets the outcome, not a missing environment."""
        self._janitor: asyncio.Task | None = None
        # Environments block (a command, a browser, a test run): each held one needs a thread of its own, and
        # asyncio's default pool has only cores + 4 threads (6 here) for up to `envs_per_worker` environments.
        self._threads = ThreadPoolExecutor(settings.envs.envs_per_worker + 4, thread_name_prefix="env")

    async def _blocking(self, fn, *args):
        """`fn(*args)` on this worker's environment threads (asyncio.to_thread, on a pool sized to the capacity)."""
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._threads, ctx.run, fn, *args)

    def held(self) -> int:
        """Environments this worker holds now (its capacity counts them)."""
        return len(self._held)

    def source(self, setting: str) -> TaskSource:
        if setting not in self._sources:
            try:
                self._sources[setting] = task_source(setting, self.settings)
            except UnknownSetting as exc:
                raise ApplicationError(str(exc), type=ErrorType.UNKNOWN_TASK, non_retryable=True) from exc
            except PluginError as exc:
                log.error("environment plugin broken", setting=setting, error=str(exc))
                raise ApplicationError(str(exc), type=ErrorType.ENV_PLUGIN_BROKEN, non_retryable=True) from exc
        return self._sources[setting]

    @activity.defn(name=LIST_TASKS.name)
    async def list_tasks(self, inp: ListTasksInput) -> TaskList:
        tasks = await self._blocking(self.source(inp.setting).tasks)
        return TaskList(task_ids=[t.task_id for t in tasks])

    @activity.defn(name=ENV_OPEN.name)
    async def env_open(self, inp: EnvOpenInput) -> EnvOpened:
        # Beats for the whole open (the task's set-up, the store write, the step limit): a worker that dies before
        # its completion reaches Temporal is noticed within the call's heartbeat timeout and the open retried on
        # another env worker, instead of holding the episode for the start-to-close.
        async with heartbeating(HEARTBEAT_S):
            return await self._open(inp)

    async def _open(self, inp: EnvOpenInput) -> EnvOpened:
        self._start_janitor()
        old = self._held.pop(inp.attempt_key, None)
        if old is not None:  # a retried open on this worker: start the task afresh
            await self._blocking(old.env.close)
        try:
            env = self.source(inp.setting).make(inp.task_id, self.sandboxes)
        except UnknownTask as exc:
            raise ApplicationError(
                f"no {inp.setting} task {inp.task_id!r}", type=ErrorType.UNKNOWN_TASK, non_retryable=True
            ) from exc
        except PluginError as exc:
            raise ApplicationError(str(exc), type=ErrorType.ENV_PLUGIN_BROKEN, non_retryable=True) from exc
        try:
            opening = await self._blocking(env.reset)
        except Exception as exc:
            await self._blocking(env.close)
            raise ApplicationError(
                f"task {inp.task_id} could not be set up: {exc}", type=ErrorType.TASK_SETUP_FAILED, non_retryable=True
            ) from exc
        tools = env.tools()
        await self.store.episodes.open(
            inp.attempt_key, EpisodeOpening(messages=opening, tools=tools, setting=inp.setting)
        )
        self._held[inp.attempt_key] = _Held(env)
        pool_metrics.envs_held(len(self._held))
        instruction = next((m.get("content", "") for m in opening if m.get("role") == "user"), "")
        log.info("environment opened", attempt_key=inp.attempt_key, setting=inp.setting, task_id=inp.task_id)
        return EnvOpened(
            worker_queue=self.worker_queue,
            instruction=clip(instruction),
            tools=len(tools),
            max_steps=await self._step_limit(inp.setting, inp.task_id),
        )

    async def _step_limit(self, setting: str, task_id: str) -> int | None:
        if (setting, task_id) not in self._step_limits:
            tasks = await self._blocking(self.source(setting).tasks)
            self._step_limits.update({(setting, t.task_id): t.max_steps for t in tasks})
        return self._step_limits.get((setting, task_id))

    @activity.defn(name=ENV_STEP.name)
    async def env_step(self, inp: EnvStepInput) -> EnvStepResult:
        held = self._get(inp.attempt_key)
        async with held.lock:
            if held.last_step == inp.step and held.last_result is not None:
                return held.last_result  # a retry whose first result never reached Temporal: the step ran once
            try:
                action = (await self.store.episodes.action(inp.attempt_key, inp.step)).action
            except EpisodeDataMissing as exc:
                raise ApplicationError(str(exc), type=ErrorType.EPISODE_DATA_MISSING, non_retryable=True) from exc
            async with self._lost_on_crash(inp.attempt_key, held), heartbeating(HEARTBEAT_S):
                obs: Observation = await self._blocking(held.env.step, action)
            added = observation_messages(obs)
            await self.store.episodes.save_observation(
                inp.attempt_key, inp.step, StepObservation(observation=obs, messages=added)
            )
            result = EnvStepResult(
                done=obs.done,
                done_reason=obs.done_reason,
                observation=clip(obs.text()),
                errors=sum(r.error for r in obs.tool_results),
            )
            held.last_step, held.last_result, held.touched = inp.step, result, time.monotonic()
            return result

    @activity.defn(name=ENV_TOOL.name)
    async def env_tool(self, inp: EnvToolInput) -> ClientToolResult:
        """A client-driven episode's tool call, run by the environment as a step with that one call."""
        call = ToolCallAction(id=inp.call_id, name=inp.name, arguments=inp.arguments)
        return await self._client_action(inp.attempt_key, inp.call_id, Action(text="", tool_calls=[call]))

    @activity.defn(name=ENV_EXEC.name)
    async def env_exec(self, inp: EnvExecInput) -> ClientExecResult:
        """A client-driven episode's shell command, in the task's workspace (environments with `run_command`)."""
        held = self._get(inp.attempt_key)
        if not callable(getattr(held.env, "run_command", None)):
            raise ApplicationError(
                f"the {held.env.setting} environment has no shell to run commands in: use its tools",
                type=ErrorType.INVALID_REQUEST,
                non_retryable=True,
            )
        async with held.lock:
            if held.last_exec is not None and held.last_exec[0] == inp.call_id:
                return held.last_exec[1]  # a retry whose first result never reached Temporal: run once
            try:
                async with self._lost_on_crash(inp.attempt_key, held), heartbeating(HEARTBEAT_S):
                    code, output = await self._blocking(held.env.run_command, inp.command)
            except (ValueError, OSError) as exc:  # a NUL byte, a command too long for the kernel
                code, output = 126, f"the command could not be started: {exc}"
            result = ClientExecResult(output=output, returncode=code)
            held.last_exec, held.touched = (inp.call_id, result), time.monotonic()
            return result

    @activity.defn(name=ENV_FINAL_ANSWER.name)
    async def env_final_answer(self, inp: EnvFinalAnswerInput) -> ClientToolResult:
        """A client-driven episode's last answer, given to the environment before its outcome is checked."""
        if callable(getattr(self._get(inp.attempt_key).env, "run_command", None)):
            # A shell's outcome is its workspace's state, and the client ran its commands itself: a text step
            # would run the last answer's command block once more.
            return ClientToolResult(content="")
        try:
            answer = (await self.store.episodes.action(inp.attempt_key, inp.step)).action
        except EpisodeDataMissing as exc:
            raise ApplicationError(str(exc), type=ErrorType.EPISODE_DATA_MISSING, non_retryable=True) from exc
        return await self._client_action(inp.attempt_key, "final-answer", Action(text=answer.text, tool_calls=[]))

    async def _client_action(self, attempt_key: str, call_id: str, action: Action) -> ClientToolResult:
        held = self._get(attempt_key)
        async with held.lock:
            if held.last_call is not None and held.last_call[0] == call_id:
                return held.last_call[1]  # a retry whose first result never reached Temporal: the call ran once
            if held.outcome is not None:
                raise ApplicationError(
                    "the episode's outcome is already checked: no more actions", type=ErrorType.INVALID_REQUEST
                )
            async with self._lost_on_crash(attempt_key, held), heartbeating(HEARTBEAT_S):
                obs: Observation = await self._blocking(held.env.step, action)
            if obs.tool_results:
                r = obs.tool_results[0]
                result = ClientToolResult(content=r.content, exit_code=r.exit_code, error=r.error, done=obs.done)
            else:
                result = ClientToolResult(content=obs.user_message or "", done=obs.done)
            held.last_call, held.touched = (call_id, result), time.monotonic()
            return result

    @activity.defn(name=ENV_OUTCOME.name)
    async def env_outcome(self, inp: EnvRef) -> Outcome:
        held = self._get(inp.attempt_key)
        async with held.lock:
            if held.outcome is None:
                try:
                    async with self._lost_on_crash(inp.attempt_key, held), heartbeating(HEARTBEAT_S):
                        value = await self._blocking(held.env.outcome)
                except WorkspaceUnreachable as exc:  # the machine is misconfigured: an outcome of 0 would train on it
                    log.error("the checker cannot reach the workspace", attempt_key=inp.attempt_key, error=str(exc))
                    raise ApplicationError(str(exc), type=ErrorType.WORKSPACE_UNREACHABLE, non_retryable=True) from exc
                held.outcome = Outcome(outcome=float(value))
            held.touched = time.monotonic()
            return held.outcome

    @activity.defn(name=ENV_FINISH.name)
    async def env_finish(self, inp: EnvRef) -> Outcome:
        """`env_outcome`, then `env_close`, in one call (EpisodeConfig.finish_in_one)."""
        done = self._finished.get(inp.attempt_key)
        if done is not None:
            return done
        outcome = await self.env_outcome(inp)
        self._finished[inp.attempt_key] = outcome
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)
        await self.env_close(inp)
        return outcome

    @activity.defn(name=ENV_CLOSE.name)
    async def env_close(self, inp: EnvRef) -> None:
        held = self._held.pop(inp.attempt_key, None)
        pool_metrics.envs_held(len(self._held))
        if held is not None:
            await self._blocking(held.env.close)

    def _get(self, attempt_key: str) -> _Held:
        held = self._held.get(attempt_key)
        if held is None:
            raise ApplicationError(
                f"this env worker does not hold {attempt_key} (it restarted, or the episode was closed)",
                type=ErrorType.ENV_MISSING,
                non_retryable=True,
            )
        held.touched = time.monotonic()
        return held

    @asynccontextmanager
    async def _lost_on_crash(self, attempt_key: str, held: _Held):
        """What the environment ran on died (a crashed browser): the episode sees a lost environment and starts over.
        A plugin's environment that broke the protocol ends the episode with the error that names the plugin."""
        try:
            yield
        except PluginError as exc:  # a plugin's environment answered outside the protocol: not worth a retry
            self._held.pop(attempt_key, None)
            await self._blocking(held.env.close)
            raise ApplicationError(str(exc), type=ErrorType.ENV_PLUGIN_BROKEN, non_retryable=True) from exc
        except EnvCrashed as exc:
            self._held.pop(attempt_key, None)
            await self._blocking(held.env.close)
            log.warning("environment crashed", attempt_key=attempt_key, error=str(exc))
            raise ApplicationError(
                f"the environment of {attempt_key} crashed: {exc}", type=ErrorType.ENV_MISSING, non_retryable=True
            ) from exc

    def _start_janitor(self) -> None:
        if self._janitor is None or self._janitor.done():
            self._janitor = asyncio.get_running_loop().create_task(self._close_idle())

    async def _close_idle(self) -> None:
        while True:
            await asyncio.sleep(60)
            now = time.monotonic()
            for key in [k for k, h in self._held.items() if now - h.touched > IDLE_CLOSE_S and not h.lock.locked()]:
                held = self._held.pop(key)
                log.warning("closing an environment no episode touched for an hour", attempt_key=key)
                await self._blocking(held.env.close)

    async def aclose(self) -> None:
        if self._janitor is not None:
            self._janitor.cancel()
        for held in list(self._held.values()):
            await self._blocking(held.env.close)
        self._held.clear()
        self._threads.shutdown(wait=False, cancel_futures=True)
        await self.store.aclose()
