"""Episodes driven by an outside agent (any OpenAI client) through the API: its model calls, tool calls and end.

The agent's harness runs its own loop. Each `/v1/episodes/{id}/chat/completions` request is a step of the
EpisodeWorkflow (update `client_step`): the policy pool renders the messages exactly as sent, generates, and keeps
the token data under the step's id, as for the policy's own episodes; the messages a request adds after the
previous answer (tool results, a user's reply) are that step's next state, judged as ours are. A task episode's
tools run in the task's environment on the env worker that holds it (update `client_tool`); its end runs the task's
checker. A free-form episode has no environment: the client posts the outcome (update `client_finish`).
Messages live in Redis; histories carry keys, counts and summaries.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.chat import ChatSampling, GenerateOutput
from contracts.episodes import ENV_RETRY, POLICY_STEP_RETRY
from contracts.errors import ErrorType

CLIENT_STEP_UPDATE = "client_step"
CLIENT_TOOL_UPDATE = "client_tool"
CLIENT_FINISH_UPDATE = "client_finish"
CLIENT_EXEC_UPDATE = "client_exec"
END_FORGOTTEN_SIGNAL = "end_forgotten"
"""Sent by a forget to its user's open episodes: the episode ends as failed and closes its environment (workspace
included) before the forget deletes it; a terminated episode would leave its environment to the env worker's idle
janitor (an hour)."""
FREE_FORM_SETTING = "client"
"""The setting (and sample stream) of free-form episodes, unless the client names its own."""


def client_episode_id(group_id: str, index: int) -> str:
    """What the client calls the episode (in URLs): `<group>.<index>`; the workflow id is episode_workflow_id."""
    return f"{group_id}.{index}"


# ---- updates -----------------------------------------------------------------------------------------------
class ClientCall(BaseModel):
    caller: str
    """The user whose key made the call: only the episode's owner may drive it."""
    traceparent: str | None = None
    """The API request's trace (W3C), when tracing is on: what the call runs joins it (an update carries no
    OpenTelemetry context into workflow code)."""


class ClientStepInput(ClientCall):
    request_key: str
    """The stored chat request (messages, tools) of this model call."""
    sampling: ChatSampling


class ClientStepOutput(BaseModel):
    step: int
    output: GenerateOutput


class ClientToolInput(ClientCall):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ClientToolResult(BaseModel):
    content: str
    """What the environment answers (truncated by it to a sensible length)."""
    exit_code: int | None = None
    error: bool = False
    done: bool = False
    """The environment considers the episode over (a `submit` tool)."""


class ClientExecInput(ClientCall):
    command: str = Field(min_length=1, max_length=100_000)
    """A shell command, run in the task's workspace with the sandbox's limits (settings with a shell)."""


class ClientExecResult(BaseModel):
    output: str
    """stdout then stderr (and why the sandbox stopped the command, if it did)."""
    returncode: int


class ClientFinishInput(ClientCall):
    outcome: float | None = None
    """Free-form episodes: the outcome, within the episode's bounds. Task episodes: none (the checker decides)."""


class ClientFinished(BaseModel):
    outcome: float
    steps: int
    end: str


class ClientEpisodeView(BaseModel):
    """What the API shows a client of its episode (query `client_view`)."""

    owner: str
    setting: str
    task_id: str
    free_form: bool
    ready: bool
    """Calls are taken (the environment is open)."""
    steps: int
    max_steps: int
    failed: str | None = None
    finished: ClientFinished | None = None


# ---- activities -----------------------------------------------------------------------------------------------
class ClientStepActivityInput(BaseModel):
    attempt_key: str
    setting: str
    step: int
    step_id: str
    request_key: str
    sampling: ChatSampling


class ClientStepActivityOutput(BaseModel):
    output: GenerateOutput
    action: str
    """The answer, summarised (as StepRecord.action)."""
    previous_observation: str | None = None
    """The messages this request added after the previous answer, summarised: the previous step's next state."""


class ClosingInput(BaseModel):
    attempt_key: str
    step: int
    """The last step: it gets what happened after it as its next state."""
    tool_results: list[ClientToolResult] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    """The tool calls the client ran through the API after that step, in order (their results, clipped)."""


class EnvToolInput(BaseModel):
    attempt_key: str
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class EnvExecInput(BaseModel):
    attempt_key: str
    call_id: str
    command: str


class EnvFinalAnswerInput(BaseModel):
    attempt_key: str
    step: int
    """The last step: its answer's text is given to the environment as a step without tool calls (a task that
    checks an answer reads it there)."""


CLIENT_STEP = ActivityDef(
    "client_step",
    ClientStepActivityInput,
    ClientStepActivityOutput,
    start_to_close=timedelta(minutes=10),
    heartbeat=timedelta(seconds=30),
    retry=POLICY_STEP_RETRY,
)
"""A client's model call (policy pool): render its messages as sent, generate, keep the tokens, record the step."""
CLIENT_CLOSING = ActivityDef(
    "client_closing",
    ClosingInput,
    None,
    start_to_close=timedelta(minutes=1),
    # Bounded: the client's finish call fails with the reason and can be sent again (nothing is set before it).
    retry=Retry(
        initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=10), maximum_attempts=8
    ),
)
"""The last step's next state (policy pool): the tool results after it; no later model call brings them."""
# The env pool's retry, and a client's bad call (a tool the environment refuses outright) is not retried either.
_ENV_RETRY = dataclasses.replace(ENV_RETRY, non_retryable=(*ENV_RETRY.non_retryable, ErrorType.INVALID_REQUEST))
ENV_TOOL = ActivityDef("env_tool", EnvToolInput, ClientToolResult, retry=_ENV_RETRY)
"""One tool call of a client-driven episode, run by the environment (env worker holding it)."""
ENV_EXEC = ActivityDef("env_exec", EnvExecInput, ClientExecResult, retry=_ENV_RETRY)
"""A shell command of a client-driven episode, in the task's workspace (environments with `run_command`)."""
ENV_FINAL_ANSWER = ActivityDef("env_final_answer", EnvFinalAnswerInput, ClientToolResult, retry=_ENV_RETRY)
