"""Anthropic Messages wire types (`POST /v1/messages`): what Anthropic clients send, what they get back.

Requests accept unknown fields (clients add their own, e.g. `thinking`, `service_tier`) but every field used is
checked, so a wrong type is a 400 with the field's path, never a crash further in.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextBlock(_Open):
    type: Literal["text"]
    text: str


class ToolUseBlock(_Open):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]


class ToolResultBlock(_Open):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[TextBlock] = ""
    is_error: bool = False

    def text(self) -> str:
        body = self.content if isinstance(self.content, str) else "".join(b.text for b in self.content)
        return f"Error: {body}" if self.is_error else body


class ThinkingBlock(_Open):
    type: Literal["thinking"]
    thinking: str


class RedactedThinkingBlock(_Open):
    type: Literal["redacted_thinking"]


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]
"""The blocks a text-only policy can take; images and documents are refused by name (a 400)."""


class MessageParam(_Open):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class ToolParam(_Open):
    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any]


class ToolChoice(_Open):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None


class Metadata(_Open):
    user_id: str | None = None


class MessagesRequest(_Open):
    model: str | None = None
    max_tokens: int = Field(ge=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoice | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    stop_sequences: list[str] | None = Field(None, max_length=4)
    stream: bool = False
    metadata: Metadata | None = None


# ---- responses ------------------------------------------------------------
class MessagesUsage(BaseModel):
    input_tokens: int
    output_tokens: int


StopReason = Literal["end_turn", "max_tokens", "tool_use", "stop_sequence"]


class Message(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[dict[str, Any]]
    stop_reason: StopReason | None
    stop_sequence: str | None = None
    usage: MessagesUsage
