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
    stop_sequence: str | None = None,
) -> GenerateOutput:
    """A turn's answer from its whole decoded text: what `generate` returns, and what the API rebuilds from a turn's
    kept token data when a retried request's turn ran in an earlier run of its session."""
    parsed = parse_completion(text, call_id_prefix=call_id_prefix)
    return GenerateOutput(
        content=parsed.content,
        reasoning=parsed.reasoning,
        tool_calls=parsed.tool_calls,
        finish_reason="tool_calls" if parsed.tool_calls and finish == "stop" else finish,
        stop_sequence=stop_sequence if finish == "stop" and not parsed.tool_calls else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        weight_version=weight_version,
        attempt=attempt,
        resumed_at=resumed_at,
    )


class StreamingSplitter:
    """Splits output text, pushed as it grows, into reasoning and content deltas, in linear time.

    Text that might still become a tag (`<thi`, `</thi`, `<tool_ca`) is held back until it
    is decided, and so is trailing whitespace (the final parse strips it before tool calls
    and after reasoning). Everything from the first `<tool_call>` on is withheld: tool calls
    are sent whole once the turn ends, and `finish` returns any content the final parse
    kept (e.g. a malformed block). Each push looks only at the new text and the few
    characters before it, so a long answer costs O(length), not O(length^2).
    """

    def __init__(self) -> None:
        self._text = ""
        self._sent = {"reasoning": 0, "content": 0}  # characters of each already sent, from its start
        self._mode: str | None = None  # None: undecided, "think": inside <think>, "content"
        self._lead = 0  # end of the leading whitespace (while undecided)
        self._reasoning_start: int | None = None  # after `<think>` and its newlines
        self._body_start: int | None = None  # where content begins
        self._close_scan = 0  # where the next search for </think> may start
        self._call_scan = 0  # where the next search for <tool_call> may start
        self._cut = -1  # index of the first <tool_call>, once seen

    def push(self, delta: str) -> tuple[str, str]:
        """(reasoning delta, content delta) safe to send now, after `delta` arrived."""
        # Rebind through a local so CPython can grow the string in place instead of copying it per push.
        text, self._text = self._text, ""
        text += delta
        self._text = text
        if self._mode is None and not self._decide():
            return "", ""
        reasoning = self._reasoning_delta() if self._reasoning_start is not None else ""
        content = self._content_delta() if self._mode == "content" else ""
        return reasoning, content

    def finish(self, final: ParsedCompletion) -> tuple[str, str]:
        return self._advance(final.reasoning or "", final.content)

    @property
    def sent_reasoning(self) -> str:
        start = self._reasoning_start or 0
        return self._text[start : start + self._sent["reasoning"]]

    @property
    def sent_content(self) -> str:
        start = self._body_start or 0
        return self._text[start : start + self._sent["content"]]

    def _decide(self) -> bool:
        """Whether the output opens with <think>; False while that is not yet known."""
        text = self._text
        while self._lead < len(text) and text[self._lead].isspace():
            self._lead += 1
        head = text[self._lead : self._lead + len(THINK_OPEN)]
        if not head or (len(head) < len(THINK_OPEN) and THINK_OPEN.startswith(head)):
            return False
        if head == THINK_OPEN:
            self._mode = "think"
            self._reasoning_start = self._close_scan = self._lead + len(THINK_OPEN)
        else:
            self._mode, self._body_start = "content", 0  # no reasoning: the content is the text as written
        return True

    def _reasoning_delta(self) -> str:
        text, start = self._text, self._reasoning_start
        assert start is not None
        if self._mode == "think":
            close = text.find(THINK_CLOSE, self._close_scan)
            if close < 0:
                self._close_scan = max(self._close_scan, len(text) - len(THINK_CLOSE) + 1)
                end = len(text) - _partial_tag_len(text, THINK_CLOSE, start)
            else:
                self._mode, end = "content", close
                self._body_start = self._call_scan = close + len(THINK_CLOSE)
        else:
            return ""  # closed on an earlier push; its tail was sent then
        if not self._sent["reasoning"]:  # newlines right after <think> are not reasoning
            while start < end and text[start] == "\n":
                start += 1
            self._reasoning_start = start
        return self._take(text, start, end, "reasoning")

    def _content_delta(self) -> str:
        text = self._text
        if self._body_start is None:
            return ""
        if self._reasoning_start is not None and not self._sent["content"]:  # newlines right after </think>
            while self._body_start < len(text) and text[self._body_start] == "\n":
                self._body_start += 1
                self._call_scan = max(self._call_scan, self._body_start)
        start = self._body_start
        if self._cut < 0:
            self._cut = text.find(CALL_OPEN, self._call_scan)
            self._call_scan = max(self._call_scan, len(text) - len(CALL_OPEN) + 1)
        end = self._cut if self._cut >= 0 else len(text) - _partial_tag_len(text, CALL_OPEN, start)
        return self._take(text, start, end, "content")

    def _take(self, text: str, start: int, end: int, part: str) -> str:
        """The new part of text[start:end] without trailing whitespace, recorded as sent."""
        begin = start + self._sent[part]
        while end > begin and text[end - 1].isspace():
            end -= 1
        if end <= begin:
            return ""
        self._sent[part] += end - begin
        return text[begin:end]

    def _advance(self, reasoning: str, content: str) -> tuple[str, str]:
        """The rest of the final parse, where it extends what was sent (called once, at the end)."""
        sent_r, sent_c = self.sent_reasoning, self.sent_content
        r_delta = reasoning[len(sent_r) :] if reasoning.startswith(sent_r) else ""
        c_delta = content[len(sent_c) :] if content.startswith(sent_c) else ""
        self._sent["reasoning"] += len(r_delta)
        self._sent["content"] += len(c_delta)
        return r_delta, c_delta


def _partial_tag_len(text: str, tag: str, floor: int) -> int:
    """Length of a trailing fragment of `text` (after index `floor`) that could be the start of `tag`."""
    for n in range(min(len(tag) - 1, len(text) - floor), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
