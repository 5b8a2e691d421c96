"""Clipping what an agent reads back: the head and the tail of a long result, the middle elided and counted."""

from __future__ import annotations


def clip_middle(text: str, keep: int) -> str:
    """`text` if it has at most `keep` characters, else its first and last `keep // 2` with a marker between."""
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters elided ...]\n{text[-half:]}"
