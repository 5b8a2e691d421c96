"""The arithmetic of a user's progress report (contracts.progress): which turns are held out, what the judge's
pairwise answer says, and the comparisons with their intervals. No I/O: activities.progress does that."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.progress import ChangedTurn, Comparison, HeldOutTurn, Verdicts

Z95 = 1.959964
"""The normal quantile of a two-sided 95% interval."""
PROMPT_CHARS = 400
ANSWER_CHARS = 1200
CHANGED_TURNS = 4
"""Turns shown side by side per report: the ones the judge preferred most clearly, both ways."""
FEW_TURNS = 10
"""Below this many judged turns the interval is wide: the report says so."""


def is_held_out(user_id: str, turn_id: str, share: float) -> bool:
    """Whether this turn is kept aside from training: a stable hash of the two ids below `share`, so the judge
    pool, a retry and an audit all agree without asking anyone."""
    if share <= 0:
        return False
    digest = hashlib.sha256(f"openclaw-rl held out\0{user_id}\0{turn_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")


def parse_preference(raw: str) -> str:
    """The judge's pick from its last `\\boxed{...}`: `A`, `B` or `tie` (anything else, or none: a tie, so a judge
    that rambles moves nothing)."""
    found = _BOXED.findall(raw or "")
    if not found:
        return "tie"
    pick = found[-1].strip().strip("*").strip().upper()
    return {"A": "A", "B": "B", "1": "A", "2": "B"}.get(pick, "tie")


def verdicts(new_first_pick: str, old_first_pick: str) -> Verdicts:
    """Both orders' picks as who won: with the new answer as A, then as B."""

    def winner(pick: str, new_is: str) -> str:
        return "tie" if pick == "tie" else ("new" if pick == new_is else "old")

    return Verdicts(new_first=winner(new_first_pick, "A"), old_first=winner(old_first_pick, "B"))


def wilson(mean: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a share `mean` of `n` (ties counted as halves, as the turn scores are)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, mean))
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Judged:
    turn: HeldOutTurn
    answer: str
    """The serving version's new answer to the same prompt."""
    verdicts: Verdicts


def version_order(version: str) -> tuple[int, str]:
    """Versions by number ("10" after "2"); a label that is no number before them all."""
    return (int(version), version) if version.isdigit() else (-1, version)


def comparison(against: str, version: str, judged: Sequence[Judged]) -> Comparison:
    scores = [j.verdicts.score for j in judged]
    rate = sum(scores) / len(scores) if scores else 0.5
    low, high = wilson(rate, len(scores))
    return Comparison(
        against=against,
        version=version,
        turns=len(scores),
        wins=sum(s == 1.0 for s in scores),
        ties=sum(0.0 < s < 1.0 for s in scores),
        losses=sum(s == 0.0 for s in scores),
        win_rate=round(rate, 4),
        low=round(low, 4),
        high=round(high, 4),
    )


def comparisons(judged: Sequence[Judged]) -> list[Comparison]:
    """Against the user's first version (the earliest that served a held-out turn), the previous one (the latest
    before the serving version), and all earlier versions together."""
    if not judged:
        return []
    versions = sorted({j.turn.version for j in judged}, key=version_order)
    out = [comparison("first", versions[0], [j for j in judged if j.turn.version == versions[0]])]
    if len(versions) > 1:
        out.append(comparison("previous", versions[-1], [j for j in judged if j.turn.version == versions[-1]]))
    out.append(comparison("all", ",".join(versions), judged))
    return out


def _last_user_text(messages: list[dict]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def changed_turns(judged: Sequence[Judged], count: int = CHANGED_TURNS) -> list[ChangedTurn]:
    """The turns the judge decided both ways alike: wins first, then losses, newest first within each."""
    clear = [j for j in judged if j.verdicts.score in (0.0, 1.0)]
    clear.sort(key=lambda j: (-j.verdicts.score, -j.turn.at))
    wins = [j for j in clear if j.verdicts.score == 1.0][: (count + 1) // 2]
    losses = [j for j in clear if j.verdicts.score == 0.0][: count - len(wins)]
    return [
        ChangedTurn(
            turn_id=j.turn.turn_id,
            prompt=_cut(_last_user_text(j.turn.messages), PROMPT_CHARS),
            before_version=j.turn.version,
            before=_cut(j.turn.answer, ANSWER_CHARS),
            after=_cut(j.answer, ANSWER_CHARS),
            score=j.verdicts.score,
        )
        for j in wins + losses
    ]


def note(judged: int, judge: str) -> str | None:
    notes = []
    if judge == "heuristic":
        notes.append(
            "the heuristic judge cannot compare two answers: every turn counts as a tie (configure an LLM judge, "
            "learning.judge, for a report that means something)"
        )
    if judged < FEW_TURNS:
        notes.append(f"only {judged} held-out turns judged: the interval is wide")
    return "; ".join(notes) or None
