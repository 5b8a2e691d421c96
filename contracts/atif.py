"""Harbor's Agent Trajectory Interchange Format (ATIF), the trajectories we export for other tools to read.

The format: RFC 0001 of the Harbor project, "Agent Trajectory Interchange Format (ATIF) Specification"
(https://github.com/harbor-framework/harbor/blob/main/rfcs/0001-trajectory-format.md; the docs page
https://harborframework.com/docs/trajectory-format). We write its current version, ATIF-v1.7, and read any
version up to it. These models are ours, written from the RFC: the root object (`Trajectory`), its `agent`,
`steps` (each a system prompt, a user message or an agent turn: its message, reasoning, tool calls, the
observation of their results, and its LLM `metrics`), and `final_metrics`. Every object has an optional `extra`
for what the format has no field for; unknown fields are refused, as the RFC's validator refuses them.

What the RFC says that a field's type cannot, checked here as its validator checks it: step ids run 1, 2, 3...;
`model_name`, `reasoning_effort`, `reasoning_content`, `tool_calls` and `metrics` belong to agent steps only; an
observation result's `source_call_id` names a tool call of its own step; an agent step with `llm_call_count` 0
(no LLM call) has no `metrics` or `reasoning_content`; timestamps are ISO 8601.

Token ids and log-probs go where the format has room for them (`Metrics`): `prompt_token_ids` (ATIF-v1.4),
`completion_token_ids` (ATIF-v1.3) and `logprobs`, one per completion token.

Not modelled: multimodal content parts (ATIF-v1.6: a message as a list of text/image parts), subagent trajectory
references and embedded subagent trajectories (ATIF-v1.7); nothing we record is either, so a message here is text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ATIF_VERSION = "ATIF-v1.7"
"""The version we write (the RFC's current one)."""
SchemaVersion = Literal[
    "ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6", "ATIF-v1.7"
]


class _Atif(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Agent(_Atif):
    """The agent system that produced the trajectory."""

    name: str
    version: str
    model_name: str | None = None
    """The LLM the trajectory's agent steps used, unless a step names its own."""
    tool_definitions: list[dict[str, Any]] | None = None
    """The tools the agent could call, each in OpenAI's function-calling shape."""
    extra: dict[str, Any] | None = None


class ToolCall(_Atif):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    """The call's arguments as an object (may be empty)."""
    extra: dict[str, Any] | None = None


class ObservationResult(_Atif):
    source_call_id: str | None = None
    """The `tool_call_id` (of this step's tool calls) this result answers; None: not a tool call's result."""
    content: str | None = None
    extra: dict[str, Any] | None = None


class Observation(_Atif):
    results: list[ObservationResult]


class Metrics(_Atif):
    """One agent step's LLM call: token counts, and the tokens themselves with their log-probs."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    """Log-probability of each completion token, as sampled."""
    extra: dict[str, Any] | None = None


class FinalMetrics(_Atif):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(None, ge=0)
    extra: dict[str, Any] | None = None


_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(_Atif):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    """ISO 8601."""
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(None, ge=0)
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso_8601(cls, v: str | None) -> str | None:
        if v is not None:
            datetime.fromisoformat(v.replace("Z", "+00:00"))  # ValueError: not ISO 8601
        return v

    @model_validator(mode="after")
    def _agent_only_fields(self) -> Step:
        if self.source != "agent":
            given = [f for f in _AGENT_ONLY if getattr(self, f) is not None]
            if given:
                raise ValueError(f"step {self.step_id}: {', '.join(given)} only on agent steps, not {self.source}")
        elif self.llm_call_count == 0 and (self.metrics is not None or self.reasoning_content is not None):
            raise ValueError(f"step {self.step_id}: llm_call_count 0 (no LLM call) with metrics or reasoning")
        called = {c.tool_call_id for c in self.tool_calls or []}
        for r in self.observation.results if self.observation else []:
            if r.source_call_id is not None and r.source_call_id not in called:
                raise ValueError(f"step {self.step_id}: an observation answers {r.source_call_id!r}, no call of its")
        return self


class Trajectory(_Atif):
    schema_version: SchemaVersion = ATIF_VERSION
    session_id: str | None = None
    """The run the trajectory belongs to (several documents of one run may share it)."""
    trajectory_id: str | None = None
    """This document's own id."""
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _sequential_step_ids(self) -> Trajectory:
        for i, step in enumerate(self.steps, start=1):
            if step.step_id != i:
                raise ValueError(f"steps[{i - 1}].step_id is {step.step_id}: step ids run 1, 2, 3... (expected {i})")
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The document as written: JSON types, absent fields left out (the RFC's examples omit them)."""
        return self.model_dump(mode="json", exclude_none=True)
