"""The heuristic judge reads style feedback: complaints about how an answer reads, redo requests, directives."""

import asyncio

import pytest

from judges.base import JudgeContext
from judges.heuristic import HeuristicJudge
from rlmath.signals import parse_boxed, parse_hint_vote


def run(reply: str, previous: str = "") -> tuple[int, int, str | None]:
    ctx = JudgeContext(response="Here it is.", next_state_role="user", next_state=reply, previous_user=previous)
    judge = HeuristicJudge()
    vote = parse_hint_vote(asyncio.run(judge.hint(ctx)))
    return parse_boxed(asyncio.run(judge.prm(ctx))), vote.score, vote.hint


@pytest.mark.parametrize(
    "reply",
    [
        "That comment is too curt.",
        "Ugh, this looks totally AI-generated.",
        "This reads like a robot wrote it.",
        "Hmm, that's not helpful feedback.",
        "Can you redo it?",
        "Please rewrite this.",
    ],
)
def test_style_complaints_and_redo_requests_are_corrections(reply):
    assert run(reply)[0] == -1


@pytest.mark.parametrize(
    "reply",
    ["Write a comment for this answer.", "How do I do this one? A farm has 3 rows.", "Alright, next one."],
)
def test_requests_without_feedback_stay_neutral(reply):
    assert run(reply)[0] == 0


def test_the_hint_is_the_directive_not_the_complaint_or_the_redo_request():
    score, accepted, hint = run(
        "That feedback is too curt. Be more specific about what the student did. Try that again."
    )
    assert (score, accepted, hint) == (-1, 1, "Be more specific about what the student did.")
    _, _, hint = run("No, this is obviously written by an AI. No bold text, and keep it casual. Can you redo it?")
    assert hint == "No bold text, and keep it casual."
    _, _, hint = run("Ugh, this looks totally AI-generated. Please write it again.")
    assert hint == "Ugh, this looks totally AI-generated."  # no directive: the complaint is the hint


def test_asking_again_scores_minus_one_without_a_hint():
    q = "Help me solve this: 3 + 4?"
    score, accepted, hint = run(q, previous=q)
    assert score == -1 and accepted == -1 and hint is None


def test_praise_still_wins_over_nothing_and_mixed_stays_mixed():
    assert run("Thanks, that's perfect! Help me solve this: 3 + 4?")[0] == 1
    assert run("Thanks, but it's too long.")[0] == 0
