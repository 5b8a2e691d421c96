"""Render chat messages to prompt token ids on our side, once.

The tokenizer and chat template come from a local checkpoint folder (the served
model's, or `policy.tokenizer_path`), so the ids we send are exactly what the
trainer later sees. Loaded without transformers (and so without torch): the
tokenizer through `tokenizers` (policy_client.tokenizer), the template rendered
with jinja2 as transformers renders it (policy_client.chat_template).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from policy_client.chat_template import render_chat
from policy_client.segments import SegmentEncoder
from policy_client.tokenizer import CheckpointTokenizer


class ChatRenderer:
    def __init__(self, tokenizer_path: Path):
        self.path = Path(tokenizer_path)
        self.tokenizer = CheckpointTokenizer(self.path)
        """Encode, decode and token lookups; not a transformers tokenizer (load one with AutoTokenizer if needed)."""
        if not self.tokenizer.chat_template:
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
        """The prompt text, as the tokenizer's `apply_chat_template(..., tokenize=False)` gives it."""
        return render_chat(
            self.tokenizer.chat_template,  # type: ignore[arg-type]
            messages,
            tools or None,
            add_generation_prompt=add_generation_prompt,
            special_tokens=self.tokenizer.special_tokens_map,
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
    """Process-wide cache: loading a tokenizer costs ~0.5 CPU-s (a 150K-token vocabulary)."""
    return ChatRenderer(Path(path))
