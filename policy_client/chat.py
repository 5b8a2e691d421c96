"""Render chat messages to prompt token ids on our side, once.

The tokenizer and chat template come from a local checkpoint folder (the served
model's, or `policy.tokenizer_path`), so the ids we send are exactly what the
trainer later sees.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any

SEGMENT_CACHE_CHARS = 4_000_000
"""Characters of rendered text whose token ids one renderer keeps (about 40 MB of ids at most)."""


class ChatRenderer:
    def __init__(self, tokenizer_path: Path):
        from transformers import AutoTokenizer

        self.path = Path(tokenizer_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer at {self.path} has no chat template")
        self._boundary = _special_token_boundary(self.tokenizer)
        self._segments: OrderedDict[str, list[int]] = OrderedDict()
        self._cached_chars = 0
        self._lock = threading.Lock()  # activities render from worker threads

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
        """Token ids of `text`, reusing those of segments seen before.

        Every turn re-renders the whole conversation (OpenClaw's system prompt alone is 8-12K tokens), so the
        text is cut just before each special token (`<|im_start|>`: one cut per message) and each segment's ids
        are cached. The tokenizer splits on special tokens before anything else, so the ids are the same as
        encoding the whole text at once.
        """
        if self._boundary is None:
            return self.tokenizer.encode(text, add_special_tokens=False)
        ids: list[int] = []
        for segment in self._boundary.split(text):
            if segment:
                ids += self._segment_ids(segment)
        return ids

    def _segment_ids(self, segment: str) -> list[int]:
        with self._lock:
            cached = self._segments.get(segment)
            if cached is not None:
                self._segments.move_to_end(segment)
                return cached
        ids = self.tokenizer.encode(segment, add_special_tokens=False)
        if len(segment) <= SEGMENT_CACHE_CHARS // 4:
            with self._lock:
                if segment not in self._segments:
                    self._segments[segment] = ids
                    self._cached_chars += len(segment)
                while self._cached_chars > SEGMENT_CACHE_CHARS:
                    old, _ = self._segments.popitem(last=False)
                    self._cached_chars -= len(old)
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def _special_token_boundary(tokenizer: Any) -> re.Pattern[str] | None:
    """A pattern matching the empty string before each special token that cuts text cleanly, or None.

    Only tokens that do not swallow neighbouring whitespace (lstrip/rstrip) cut cleanly.
    """
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    specials = sorted(
        (t.content for t in decoder.values() if t.special and not t.lstrip and not t.rstrip and t.content),
        key=len,
        reverse=True,
    )
    if not specials:
        return None
    return re.compile("(?=" + "|".join(re.escape(t) for t in specials) + ")")


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
