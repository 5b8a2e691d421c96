"""Turn raw model output into an OpenAI assistant message, whole or as a stream.

Qwen3/Hermes layout: optional `<think>...</think>` reasoning, then content, with
tool calls as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks.
A block that is not valid JSON stays in the content, so nothing the model wrote
is silently dropped.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field

from contracts.chat import GenerateOutput, ToolCall

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL_BLOCK = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.DOTALL)


class ParsedCompletion(BaseModel):
    content: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


def split_reasoning(text: str) -> tuple[str | None, str]:
    if THINK_CLOSE not in text:
        if text.lstrip().startswith(THINK_OPEN):  # cut off while still thinking
            return text.lstrip()[len(THINK_OPEN) :].strip("\n"), ""
        return None, text
    head, _, tail = text.partition(THINK_CLOSE)
    reasoning = head.split(THINK_OPEN, 1)[-1].strip("\n")
    return reasoning, tail.lstrip("\n")


def parse_completion(text: str, call_id_prefix: str) -> ParsedCompletion:
    """`call_id_prefix` makes tool-call ids unique and stable for one turn (e.g. the turn id)."""
    reasoning, body = split_reasoning(text)
    calls: list[ToolCall] = []

    def take(match: re.Match[str]) -> str:
        try:
            obj = json.loads(match.group(1))
        except ValueError:
            return match.group(0)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return match.group(0)
        args = obj.get("arguments", {})
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(id=f"call_{call_id_prefix}_{len(calls)}", name=obj["name"], arguments=arguments))
        return ""

    content = _CALL_BLOCK.sub(take, body)
    if calls:
        content = content.strip()
    return ParsedCompletion(content=content, reasoning=reasoning, tool_calls=calls)


def generate_output(
    text: str,
    finish: str,
    *,
    call_id_prefix: str,
    prompt_tokens: int,
    completion_tokens: int,
    weight_version: str | None,
    attempt: int = 1,
    resumed_at: int = 0,
) -> GenerateOutput:
    """A turn's answer from its whole decoded text: what `generate` returns, and what the API rebuilds from a turn's
    kept token data when a retried request's turn ran in an earlier run of its session."""
    parsed = parse_completion(text, call_id_prefix=call_id_prefix)
    return GenerateOutput(
        content=parsed.content,
        reasoning=parsed.reasoning,
        tool_calls=parsed.tool_calls,
        finish_reason="tool_calls" if parsed.tool_calls and finish == "stop" else finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        weight_version=weight_version,
        attempt=attempt,
        resumed_at=resumed_at,
    )


class StreamingSplitter:
    """Splits cumulative output text into reasoning and content deltas as it grows.

    Text that might still become a tag (`<thi`, `<tool_ca`) is held back until it
    is decided. Everything from the first `<tool_call>` on is withheld: tool calls
    are sent whole once the turn ends, and `finish` returns any content the final
    parse kept (e.g. a malformed block).
    """

    def __init__(self) -> None:
        self.sent_reasoning = ""
        self.sent_content = ""

    def feed(self, cumulative: str) -> tuple[str, str]:
        """(reasoning delta, content delta) safe to send now."""
        reasoning, body = self._split_partial(cumulative)
        cut = body.find(CALL_OPEN)
        visible = body if cut < 0 else body[:cut]
        visible = _hold_partial_tag(visible, (CALL_OPEN,)) if cut < 0 else visible
        # Trailing whitespace waits: the final parse strips it before tool calls and after reasoning.
        return self._advance((reasoning or "").rstrip(), visible.rstrip())

    def finish(self, final: ParsedCompletion) -> tuple[str, str]:
        return self._advance(final.reasoning or "", final.content)

    def _split_partial(self, text: str) -> tuple[str | None, str]:
        stripped = text.lstrip()
        if stripped.startswith(THINK_OPEN) and THINK_CLOSE not in text:
            return _hold_partial_tag(stripped[len(THINK_OPEN) :].lstrip("\n"), (THINK_CLOSE,)), ""
        if not stripped or THINK_OPEN.startswith(stripped):
            return None, ""  # might be the start of <think>
        return split_reasoning(text)

    def _advance(self, reasoning: str, content: str) -> tuple[str, str]:
        r_delta = reasoning[len(self.sent_reasoning) :] if reasoning.startswith(self.sent_reasoning) else ""
        c_delta = content[len(self.sent_content) :] if content.startswith(self.sent_content) else ""
        self.sent_reasoning += r_delta
        self.sent_content += c_delta
        return r_delta, c_delta


def _hold_partial_tag(text: str, tags: tuple[str, ...]) -> str:
    """`text` without a trailing fragment that could be the start of one of `tags`."""
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), 0, -1):
            if text.endswith(tag[:n]):
                return text[:-n]
    return text
