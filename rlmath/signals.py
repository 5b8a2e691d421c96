"""Learning signals of the personal agent (paper section 4, the reference's rules).

Pure functions: judge-output parsing, vote aggregation, hint selection, the
teacher context and the per-turn dispatch of binary RL, OPD and their
combination (token-level advantages: rlmath.advantages). Plain Python, no I/O,
so workflow code can use it; unit-tested against hand-computed numbers.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from contracts.learning import JudgeSummary, Method, VoteResult

PRM_SCORES = frozenset({1, -1, 0})
HINT_SCORES = frozenset({1, -1})
MIN_HINT_CHARS = 10
"""A hint must be longer than this (stripped) to be used."""
TEACHER_HINT_TEMPLATE = "\n\n[user's hint / instruction]\n{hint}"

_BOXED = re.compile(r"\\boxed\{\s*([^{}]*?)\s*\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)


def parse_boxed(text: str, allowed: frozenset[int] = PRM_SCORES) -> int | None:
    """The value of the LAST `\\boxed{...}` whose content is an allowed integer; None otherwise."""
    for raw in reversed(_BOXED.findall(text or "")):
        try:
            value = float(raw)
        except ValueError:
            continue
        if value.is_integer() and int(value) in allowed:
            return int(value)
    return None


def majority_vote(votes: Sequence[int | None]) -> int:
    """Most common valid vote; no valid votes -> 0; a tie at the top -> 0."""
    counts = Counter(v for v in votes if v is not None)
    if not counts:
        return 0
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return 0
    return ranked[0][0]


def representative(votes: Sequence[int | None], raws: Sequence[str], winner: int) -> str | None:
    """The first raw judge output agreeing with the winner (kept for the record)."""
    return next((raw for v, raw in zip(votes, raws) if v == winner), None)


@dataclass(frozen=True)
class HintVote:
    score: int | None
    hint: str | None


def parse_hint_vote(text: str) -> HintVote:
    score = parse_boxed(text, HINT_SCORES)
    found = _HINT.findall(text or "")
    return HintVote(score=score, hint=found[-1].strip() if found else None)


def select_hint(votes: Sequence[HintVote]) -> str | None:
    """Among votes scoring 1 with a stripped hint longer than 10 characters, the longest; else None."""
    good = [v.hint.strip() for v in votes if v.score == 1 and v.hint and len(v.hint.strip()) > MIN_HINT_CHARS]
    return max(good, key=len) if good else None


def judge_summary(judge: str, prm: Sequence[VoteResult | None], hints: Sequence[VoteResult | None]) -> JudgeSummary:
    """A turn's votes as the record keeps them: the PRM majority and its representative output, the chosen hint,
    and how many votes failed (None: a vote that failed every try)."""
    scores = [v.score if v else None for v in prm]
    eval_score = majority_vote(scores) if prm else None
    return JudgeSummary(
        judge=judge,
        prm_votes=scores,
        eval_score=eval_score,
        hint=select_hint([HintVote(v.score, v.hint) for v in hints if v is not None]) if hints else None,
        hint_votes=len(hints),
        failed_votes=sum(v is None for v in [*prm, *hints]),
        representative=representative(scores, [v.raw if v else "" for v in prm], eval_score)
        if prm and eval_score is not None
        else None,
    )


def teacher_messages(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The context the model 'would have seen' had the user given the hint up front.

    The hint is appended to the LAST user message; with no user message, to the
    last message; with no messages at all, it becomes a new user message.
    """
    out = [dict(m) for m in messages]
    suffix = TEACHER_HINT_TEMPLATE.format(hint=hint)
    target = next((i for i in range(len(out) - 1, -1, -1) if out[i].get("role") == "user"), len(out) - 1)
    if target < 0:
        return [{"role": "user", "content": suffix.lstrip("\n")}]
    out[target]["content"] = _as_text(out[target].get("content")) + suffix
    return out


def _as_text(content: Any) -> str:
    # A local copy of policy_client.chat.message_text: this module stays free of I/O-side imports.
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


AT_LEAST_ONE = "at least one sample per session"
"""The reason of the one score-0 turn per session the binary method keeps (the reference's at-least-one rule)."""


@dataclass(frozen=True)
class Dispatch:
    """What one judged turn contributes to training."""

    reward: float
    use_teacher: bool
    loss_mask: int = 1
    reason: str = ""


def dispatch(
    method: Method,
    *,
    has_next_state: bool,
    eval_score: int | None,
    hint: str | None,
    session_has_effective_sample: bool,
) -> Dispatch | None:
    """The reference's per-turn rules. None: the turn yields no sample.

    binary:   no next state -> reward 0, loss mask 0 (submitted, never learned from);
              score +-1 -> reward; score 0 -> dropped, unless the session has no
              effective sample yet (at-least-one rule: kept with reward 0, mask 1).
    opd:      an accepted hint -> teacher term only; otherwise dropped (also with no next state).
    combined: hint and score +-1 -> both; hint only -> reward 0 plus teacher;
              score only -> RL only; neither -> dropped.
    """
    if method is Method.BINARY:
        if not has_next_state:
            return Dispatch(reward=0.0, use_teacher=False, loss_mask=0, reason="no next state")
        if eval_score in (1, -1):
            return Dispatch(reward=float(eval_score), use_teacher=False, reason="scored")
        if not session_has_effective_sample:
            return Dispatch(reward=0.0, use_teacher=False, reason=AT_LEAST_ONE)
        return None
    if not has_next_state:
        return None
    if method is Method.OPD:
        return Dispatch(reward=0.0, use_teacher=True, reason="hint") if hint else None
    scored = eval_score in (1, -1)
    if hint and scored:
        return Dispatch(reward=float(eval_score), use_teacher=True, reason="hint and score")
    if hint:
        return Dispatch(reward=0.0, use_teacher=True, reason="hint only")
    if scored:
        return Dispatch(reward=float(eval_score), use_teacher=False, reason="score only")
    return None
