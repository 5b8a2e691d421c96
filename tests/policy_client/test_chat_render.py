"""Rendering a conversation reuses the token ids of segments seen before, with the same ids as a full encode."""

from __future__ import annotations

import random

from policy_client.chat import ChatRenderer

PIECES = ["hello", " world", "\n\n", "<think>", "</think>", "<tool_call>", "  ", "é", "日本", "<|im_end|>",
          "x<|im_start|>y", "\t", "123", "!!"]  # fmt: skip


def _conversation(rng: random.Random) -> list[dict]:
    def text(n: int) -> str:
        return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, n)))

    msgs = [{"role": "system", "content": text(30)}]
    for _ in range(rng.randint(1, 4)):
        msgs += [{"role": "user", "content": text(20)}, {"role": "assistant", "content": text(20)}]
    return msgs + [{"role": "user", "content": text(5)}]


def test_segment_cache_gives_the_ids_of_a_whole_encode(tiny_model):
    r = ChatRenderer(tiny_model)
    rng = random.Random(0)
    for _ in range(150):
        text = r.render_text(_conversation(rng))
        assert r.encode(text) == r.tokenizer.encode(text, add_special_tokens=False), text


def test_a_long_system_prompt_is_tokenized_once_per_process(tiny_model, monkeypatch):
    r = ChatRenderer(tiny_model)
    system = {"role": "system", "content": "You are OpenClaw, a personal agent with many tools. " * 800}
    first = r.render([system, {"role": "user", "content": "hi"}])
    encoded: list[int] = []
    real = r._encoder._encode_new
    monkeypatch.setattr(r._encoder, "_encode_new", lambda texts: encoded.extend(map(len, texts)) or real(texts))
    later = r.render([system, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                      {"role": "user", "content": "next"}])  # fmt: skip
    assert later[: len(first) - 3] == first[: len(first) - 3]  # the shared head, up to the generation prompt
    assert encoded and max(encoded) < 200  # only the new messages were tokenized, not the 40,000-char prompt
