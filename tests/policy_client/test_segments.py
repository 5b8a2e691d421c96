"""Text cut into cached segments (before special tokens, after newline runs) tokenizes to the ids of the whole."""

from __future__ import annotations

import random

from transformers import AutoTokenizer

from policy_client.segments import SegmentEncoder, newline_cuts_are_exact

# Fragments chosen around the cut rules: newline runs before spaces, tabs and letters, punctuation that swallows
# trailing newlines ("?\n"), combining marks and scripts NFC touches, special and added tokens next to newlines.
PIECES = ["\n", "\r\n", "\n\n", " \n", "\n ", "\t", "  ", "word", " word", "Word", "?", "!!", ".\n", "123", "4",
          "'s", "é", "e\u0301", "\u0301", "日本", "🙂", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
          "<tool_call>", "{\"a\": 1}", "-", "_x", "\u00a0", "\u2028"]  # fmt: skip


def test_segments_give_the_ids_of_a_whole_encode_on_random_text(tiny_model):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    enc = SegmentEncoder(tok)
    assert newline_cuts_are_exact(tok)  # the Qwen byte-level regex: newline cuts are on
    rng = random.Random(0)
    for _ in range(1500):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        want = tok.encode(text, add_special_tokens=False)
        assert enc.encode(text) == want, repr(text)
        assert enc.encode(text) == want, repr(text)  # again, from the cache


def test_a_long_prompt_with_one_line_changed_tokenizes_only_that_line(tiny_model, monkeypatch):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    enc = SegmentEncoder(tok)
    lines = [f"Rule {i}: use the tools you are given, and say what you did." for i in range(600)]
    first = "\n".join(lines)
    assert enc.encode(first) == tok.encode(first, add_special_tokens=False)
    encoded: list[str] = []
    real = enc._encode_new
    monkeypatch.setattr(enc, "_encode_new", lambda texts: encoded.extend(texts) or real(texts))
    lines[300] = "Current time: 12:01."
    second = "\n".join(lines)
    assert enc.encode(second) == tok.encode(second, add_special_tokens=False)
    assert encoded == ["Current time: 12:01.\n"]


def test_a_tokenizer_without_the_known_regex_gets_no_newline_cuts(tiny_model, tmp_path):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    backend = tok.backend_tokenizer
    from tokenizers import pre_tokenizers

    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)  # GPT-2 style: prefix spaces differ
    assert not newline_cuts_are_exact(tok)
    enc = SegmentEncoder(tok)
    text = "a\nb\nc<|im_start|>d"
    assert enc.encode(text) == tok.encode(text, add_special_tokens=False)


def test_requests_arriving_together_with_a_new_prompt_encode_it_once(tiny_model, monkeypatch):
    import threading

    tok = AutoTokenizer.from_pretrained(tiny_model)
    enc = SegmentEncoder(tok)
    system = "You are a personal agent; follow the rules. " * 900  # one 40,000-char line
    texts = [f"{system}\nQuestion {i}: what next?" for i in range(8)]
    encoded: list[str] = []
    real = enc._encode_new
    gate = threading.Barrier(8)

    def slow(segments: list[str]) -> list[list[int]]:
        encoded.extend(segments)
        return real(segments)

    monkeypatch.setattr(enc, "_encode_new", slow)
    results: dict[int, list[int]] = {}

    def one(i: int) -> None:
        gate.wait()
        results[i] = enc.encode(texts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(results[i] == tok.encode(texts[i], add_special_tokens=False) for i in range(8))
    assert encoded.count(system + "\n") == 1  # the others waited for it instead of encoding it again
