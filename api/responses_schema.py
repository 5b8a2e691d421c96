"""OpenAI Responses wire types (`POST /v1/responses`): what Responses clients send.

Requests accept unknown fields (clients add their own, e.g. `reasoning`, `text`, `include`) but every field used is
checked, so a wrong type is a 400 with the field's path, never a crash further in. Output objects are built as
plain dicts in api.openai_responses (their shape is the SDK's, field for field).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class InputText(_Open):
    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(_Open):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputText]

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class FunctionCallItem(_Open):
    type: Literal["function_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str


class FunctionCallOutputItem(_Open):
    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[InputText]

    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(p.text for p in self.output)


class CustomToolCallItem(_Open):
    """A call of a custom (freeform) tool, e.g. Codex's `apply_patch`: its `input` is free text, not JSON."""

    type: Literal["custom_tool_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: str


class CustomToolCallOutputItem(_Open):
    type: Literal["custom_tool_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[InputText]

    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(p.text for p in self.output)


class ReasoningItem(_Open):
    """A reasoning item a client hands back; its text stays out of the prompt (the template drops old thinking)."""

    type: Literal["reasoning"]


def _item_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("type", "message")  # an "easy" input message has no type
    return getattr(value, "type", None)


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[CustomToolCallItem, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutputItem, Tag("custom_tool_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_kind),
]


class FunctionTool(_Open):
    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class CustomTool(_Open):
    """A freeform tool (Codex's `apply_patch`): the model calls it with one free-text input, which `format` (a
    grammar, or plain text) describes. The policy sees it as a function of one string parameter, `input`."""

    type: Literal["custom"]
    name: str = Field(min_length=1)
    description: str | None = None
    format: dict[str, Any] | None = None


class NamespaceTool(_Open):
    """A named group of function tools (Codex's `multi_agent_v1`); the policy sees its functions by their names."""

    type: Literal["namespace"]
    name: str = Field(min_length=1)
    description: str | None = None
    tools: list[FunctionTool]


HOSTED_TOOLS = (
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
    "mcp",
    "local_shell",
    "tool_search",
)
"""Tool types OpenAI's servers run (or that need an output item kind the policy cannot produce): accepted so a client
that always sends them (Codex sends `web_search` and `tool_search`) works, and left out of the prompt: the policy
never calls them. docs/protocol-openai-responses.md."""


class HostedTool(_Open):
    type: Literal[HOSTED_TOOLS]  # type: ignore[valid-type]


def _tool_kind(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "hosted" if kind in HOSTED_TOOLS else kind


Tool = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[CustomTool, Tag("custom")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[HostedTool, Tag("hosted")],
    Discriminator(_tool_kind),
]


class FunctionChoice(_Open):
    type: Literal["function", "custom"]
    name: str = Field(min_length=1)


class ResponsesRequest(_Open):
    model: str | None = None
    input: str | list[InputItem]
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["auto", "none", "required"] | FunctionChoice | None = None
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1)
    metadata: dict[str, str] | None = None
