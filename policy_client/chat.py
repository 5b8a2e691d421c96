"""Render chat messages to prompt token ids on our side, once.

The tokenizer and chat template come from a local checkpoint folder (the served
model's, or `policy.tokenizer_path`), so the ids we send are exactly what the
trainer later sees.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from policy_client.segments import SegmentEncoder


class ChatRenderer:
    def __init__(self, tokenizer_path: Path):
        from transformers import AutoTokenizer

        self.path = Path(tokenizer_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer at {self.path} has no chat template")
        self._encoder = SegmentEncoder(self.tokenizer)

    def render_text(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **template_kwargs: Any
    ) -> list[int]:
        return self.encode(self.render_text(messages, tools, **template_kwargs))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, reusing those of segments seen before (policy_client.segments)."""
        return self._encoder.encode(text)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def message_text(content: Any, sep: str = "") -> str:
    """A message's content as text, whether a string or a list of OpenAI content parts (text parts only)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return sep.join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return ""


@lru_cache(maxsize=4)
def renderer_for(path: str) -> ChatRenderer:
    """Process-wide cache: loading a tokenizer costs ~1 s."""
    return ChatRenderer(Path(path))
