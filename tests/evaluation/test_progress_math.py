"""The arithmetic of a user's progress report (evals/progress.py): which turns are held out, the judge's pairwise
verdicts read both ways, Wilson's interval, the comparisons against the first and previous versions, and the turns
shown side by side."""

from __future__ import annotations

import pytest

from contracts.progress import HeldOutTurn
from evals import progress
from evals.progress import Judged, is_held_out, parse_preference, verdicts, wilson


def test_held_out_turns_are_a_stable_share_of_each_users_turns():
    ids = [f"turn-{i}" for i in range(4000)]
    held = [t for t in ids if is_held_out("alice", t, 0.1)]
    assert 0.085 < len(held) / len(ids) < 0.115
    assert held == [t for t in ids if is_held_out("alice", t, 0.1)]  # the same turns every time
    assert set(held) != {t for t in ids if is_held_out("bob", t, 0.1)}  # each user's own draw
    assert not any(is_held_out("alice", t, 0.0) for t in ids)
    # A larger share holds out a superset: raising it never moves a turn back into training.
    assert set(held) <= {t for t in ids if is_held_out("alice", t, 0.3)}


@pytest.mark.parametrize(
    "raw, pick",
    [
        ("A is clearer. \\boxed{A}", "A"),
        ("\\boxed{ B }", "B"),
        ("first \\boxed{A}, on reflection \\boxed{B}", "B"),  # the last box is the verdict
        ("\\boxed{tie}", "tie"),
        ("\\boxed{**A**}", "A"),
        ("no verdict at all", "tie"),
        ("\\boxed{maybe}", "tie"),
        ("", "tie"),
    ],
)
def test_the_judges_pick_is_its_last_box(raw, pick):
    assert parse_preference(raw) == pick


def test_both_orders_cancel_a_judge_that_always_picks_the_first_answer():
    # New shown first (A) then second (B): a judge always saying A gives the new answer one win and one loss.
    v = verdicts("A", "A")
    assert (v.new_first, v.old_first, v.score) == ("new", "old", 0.5)
    assert verdicts("A", "B").score == 1.0  # the new answer, wherever it stood
    assert verdicts("B", "A").score == 0.0
    assert verdicts("tie", "B").score == 0.75


def test_wilson_interval_matches_its_textbook_values():
    low, high = wilson(0.5, 100)
    assert low == pytest.approx(0.4038, abs=1e-3) and high == pytest.approx(0.5962, abs=1e-3)
    low, high = wilson(1.0, 10)
    assert high == pytest.approx(1.0) and low == pytest.approx(0.7225, abs=1e-3)  # no certainty from 10 turns
    assert wilson(0.5, 0) == (0.0, 1.0)


def turn(i: int, version: str) -> HeldOutTurn:
    return HeldOutTurn(
        turn_id=f"t{i}",
        at=1000.0 + i,
        version=version,
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": f"question {i}"}],
        answer=f"old answer {i}",
    )


def judged(i: int, version: str, new_first: str, old_first: str) -> Judged:
    return Judged(turn=turn(i, version), answer=f"new answer {i}", verdicts=verdicts(new_first, old_first))


def test_comparisons_are_against_the_first_and_the_previous_version_and_all():
    js = [
        judged(0, "2", "A", "B"),  # win
        judged(1, "2", "A", "A"),  # tie (position bias)
        judged(2, "10", "B", "A"),  # loss
        judged(3, "10", "A", "B"),  # win
        judged(4, "10", "A", "B"),  # win
    ]
    first, previous, everything = progress.comparisons(js)
    assert (first.against, first.version, first.turns, first.wins, first.ties, first.losses) == (
        "first",
        "2",
        2,
        1,
        1,
        0,
    )
    assert first.win_rate == 0.75 and first.low < 0.75 < first.high
    # "10" sorts after "2" as a version number, not as text.
    assert (previous.against, previous.version, previous.turns, previous.win_rate) == ("previous", "10", 3, 0.6667)
    assert (everything.against, everything.version, everything.turns) == ("all", "2,10", 5)
    assert everything.win_rate == pytest.approx((1 + 0.5 + 0 + 1 + 1) / 5, abs=1e-4)
    # One earlier version: no "previous" apart from the first.
    assert [c.against for c in progress.comparisons(js[:2])] == ["first", "all"]
    assert progress.comparisons([]) == []


def test_changed_turns_are_the_clear_wins_then_losses_side_by_side():
    js = [judged(i, "1", "A", "B") for i in range(3)] + [judged(3, "1", "B", "A"), judged(4, "1", "A", "A")]
    changed = progress.changed_turns(js, count=4)
    assert [c.turn_id for c in changed] == ["t2", "t1", "t3"]  # newest wins first, then the loss; never the tie
    assert changed[0].prompt == "question 2"  # the user's message, not the system prompt
    assert (changed[0].before, changed[0].after, changed[0].before_version) == ("old answer 2", "new answer 2", "1")
    assert [c.score for c in changed] == [1.0, 1.0, 0.0]


def test_the_note_says_when_a_report_means_little():
    assert "heuristic judge cannot compare" in progress.note(40, "heuristic")
    assert "only 3 held-out turns" in progress.note(3, "llm")
    assert progress.note(40, "llm") is None


def test_a_long_conversation_shown_to_the_judge_keeps_the_head_of_its_system_prompt():
    from activities.progress import CONVERSATION_CHARS, conversation_text

    system = "You are helpful.\n\n# USER.md\nOne plain paragraph, no bold."
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 400} for i in range(40)]
    text = conversation_text([{"role": "system", "content": system}, *turns])
    assert len(text) <= CONVERSATION_CHARS + 1
    assert text.startswith(f"system: {system}") and text.endswith(turns[-1]["content"])
    assert "turn 0 " not in text  # the middle is cut, not the user's standing instructions
    short = conversation_text([{"role": "system", "content": system}, *turns[:2]])
    assert short.count("x" * 400) == 2 and short.startswith("system: ")
