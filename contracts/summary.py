"""How long summaries in histories and records are: full data stays in Redis or on disk."""

from __future__ import annotations

SUMMARY_CHARS = 300
"""Turn records, episode steps and other history entries hold summaries this long."""
JUDGE_RAW_CHARS = 2000
"""Raw judge outputs are clipped to this in records and payloads."""


def clip(text: str | None, n: int = SUMMARY_CHARS) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 1] + "…"
