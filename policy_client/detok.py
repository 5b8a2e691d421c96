"""Incremental detokenization: text of a growing token sequence, a token at a time, in constant work per token.

As vLLM and SGLang do it: decode a short window of the newest ids with a little context before them and emit only
what the window adds; text of an incomplete multi-byte character waits for the token that completes it. Decoding the
whole answer again for every token (or every flush) is quadratic in the answer's length.
"""

from __future__ import annotations

from typing import Any


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Any, skip_special_tokens: bool = True):
        self.tokenizer, self.skip = tokenizer, skip_special_tokens
        self.ids: list[int] = []
        self.prefix = 0  # window start: context decoded again for the next token's text
        self.read = 0  # ids whose text has been emitted

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip)

    def push(self, token: int) -> str:
        """Append one token; the text it completes (empty while a character is incomplete)."""
        self.ids.append(token)
        prefix_text = self._decode(self.ids[self.prefix : self.read])
        new_text = self._decode(self.ids[self.prefix :])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return new_text[len(prefix_text) :]
        return ""

    def extend(self, tokens: list[int]) -> str:
        return "".join(self.push(t) for t in tokens)

    def flush(self) -> str:
        """The text of tokens not emitted yet, incomplete characters included (the end of the answer)."""
        prefix_text = self._decode(self.ids[self.prefix : self.read])
        new_text = self._decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return new_text[len(prefix_text) :] if new_text.startswith(prefix_text) else ""
