"""The chat turn's messages: what the API stores, what `generate` takes and returns."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType


class TurnType(StrEnum):
    MAIN = "main"
    SIDE = "side"


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """JSON text of the arguments, as OpenAI's `function.arguments` carries it."""

    def to_openai(self, index: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }
        if index is not None:
            out["index"] = index
        return out


class ChatSampling(BaseModel):
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None
    """None: session.default_max_tokens, capped by the context left."""
    stop: list[str] = Field(default_factory=list)


class StoredChatRequest(BaseModel):
    """What the client sent that the prompt is rendered from (kept in Redis, by turn id)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None


class GenerateInput(BaseModel):
    turn_id: str
    sampling: ChatSampling
    stream: bool = True
    """Publish tokens as they come (the client streams). False: one plain generation, published whole at the end;
    a retry then starts over, which no client can notice since it saw nothing yet."""
    tenant: str | None = None
    """Whose turn it is, as an opaque token (`tenant_of`): the engine shares its slots fairly between tenants."""


class GenerateOutput(BaseModel):
    content: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: Literal["stop", "length", "tool_calls"]
    stop_sequence: str | None = None
    """The request's stop string that ended the answer (trimmed from `content`); None for an end of turn."""
    prompt_tokens: int
    completion_tokens: int
    weight_version: str | None = None
    attempt: int = 1
    resumed_at: int = 0
    """Tokens kept from earlier attempts that died mid-generation."""


GENERATE = ActivityDef(
    "generate",
    GenerateInput,
    GenerateOutput,
    # 20 attempts, 5 s apart once backed off: a turn waits out about 90 s of policy-server outage (an engine
    # restart takes 10-40 s) before it fails; 5 attempts (15 s) failed every turn in flight during one.
    retry=Retry(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=20,
        non_retryable=(ErrorType.PROMPT_TOO_LONG, ErrorType.INVALID_REQUEST, ErrorType.REQUEST_MISSING),
    ),
)
"""Timeouts are `session.generate_timeout_s` / `generate_heartbeat_s`, passed by the session at the call."""


def tenant_of(user_id: str) -> str:
    """The engine's name for a user: stable, and no user id leaves the system's own stores in a request header."""
    return "u-" + hashlib.sha256(f"openclaw-rl tenant\0{user_id}".encode()).hexdigest()[:16]


AGENTS_TENANT = "agents"
"""General-agent rollouts share one tenant: a large rollout gets its share of the engine, not all of it."""
