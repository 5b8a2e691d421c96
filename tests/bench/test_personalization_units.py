"""The personalization benchmark's parts: problems, styles, the scorer, the simulated users, and what the
heuristic judge makes of the users' replies."""

from __future__ import annotations

import asyncio
import random

import pytest

from bench.personalization.users import MAX_ATTEMPTS, SimulatedUser
from evals.personalization import styles
from evals.personalization.problems import eval_problems, make_grading_task, make_problem
from evals.personalization.scorer import LlmScorer, RuleScorer, parse_score
from judges.base import JudgeContext
from judges.heuristic import HeuristicJudge
from rlmath.signals import parse_boxed, parse_hint_vote

STUDENT_EXPECTED = {"ai_full": 0.0, "ai_light": 0.25, "two_part": 0.5, "casual_bold": 0.75, "casual": 1.0}
TEACHER_EXPECTED = {
    "terse": 0.0,
    "terse_number": 0.25,
    "short_friendly": 0.25,
    "brief_specific": 0.5,
    "specific_neutral": 0.75,
    "specific_friendly": 1.0,
}


def judge(reply: str, previous: str = "") -> tuple[int, str | None]:
    ctx = JudgeContext(response="answer", next_state_role="user", next_state=reply, previous_user=previous)
    j = HeuristicJudge()
    score = parse_boxed(asyncio.run(j.prm(ctx)))
    hint = parse_hint_vote(asyncio.run(j.hint(ctx)))
    return score, (hint.hint if hint.score == 1 else None)


def test_problems_are_reproducible_and_splits_disjoint():
    assert make_problem(3, 5) == make_problem(3, 5)
    assert make_problem(3, 5) != make_problem(4, 5)
    train = {make_problem(0, i, "train").text for i in range(400)}
    held = {p.text for p in eval_problems(0)}
    users = {make_problem(0, i, "users").text for i in range(400)}
    assert len(held) == 36 and not held & train and not held & users
    g = make_grading_task(1, 2)
    assert g.student_correct == (g.student_answer == g.problem.answer)


@pytest.mark.parametrize("style, expected", sorted(STUDENT_EXPECTED.items()))
def test_rule_scorer_student_styles(style, expected):
    for i in range(20):
        p = make_problem(0, i, "eval")
        text = styles.student_answer(p, style, random.Random(i))
        assert RuleScorer().score("student", p, text).value == expected, text


@pytest.mark.parametrize("style, expected", sorted(STUDENT_EXPECTED.items()))
def test_rule_scorer_manager_is_the_students_opposite(style, expected):
    """The two-user benchmark's manager: one answer's two scores add to 1, so no answer pleases both users."""
    for i in range(20):
        p = make_problem(0, i, "eval")
        text = styles.student_answer(p, style, random.Random(i))
        assert RuleScorer().score("manager", p, text).value == 1.0 - expected, text
    assert RuleScorer().score("manager", p, "**1.** ok").value == 0.0  # no attempt pleases nobody


@pytest.mark.parametrize("style, expected", sorted(TEACHER_EXPECTED.items()))
def test_rule_scorer_teacher_styles(style, expected):
    for i in range(20):
        t = make_grading_task(0, i, "eval")
        text = styles.teacher_comment(t, style, random.Random(i))
        assert RuleScorer().score("teacher", t, text).value == expected, text


def test_rule_scorer_on_the_papers_examples():
    p = make_problem(0, 0, "eval")
    before = "Sara needs $70 total.\n\n**$40 / $4 = 10**\n\n**Answer:** Sara must mow the lawn **10 times**."
    after = (
        "The jacket costs $30 and two pairs of shoes at $20 each, so that's $40 total for shoes. Sara needs "
        "$70 - $30 = $40 more. Since she makes $4 per lawn mow, she needs 40 / 4 = 10. So the answer is 10 times."
    )
    s = RuleScorer()
    assert s.score("student", p, before).value == 0.25  # bold, label, several lines (no list)
    assert s.score("student", p, after).value == 1.0
    assert s.score("student", p, "I don't know.").value == 0.0  # no attempt
    t = make_grading_task(0, 0, "eval")
    assert s.score("teacher", t, "Correct. Well done!").value == 0.25
    n = t.problem.answer
    friendly = (
        f"Your step-by-step approach is fantastic! You correctly worked out each part and got {n}. This shows you "
        "understand how to break down the problem and find the solution. Well done!"
    )
    assert s.score("teacher", t, friendly).value == 1.0


def test_llm_scorer_prompt_and_parsing():
    msgs = LlmScorer("http://127.0.0.1:9").messages("teacher", make_grading_task(0, 0, "eval"), "Correct.")
    assert "score the assistant's first response" in msgs[0]["content"]
    assert "specific" in msgs[0]["content"] and "[PREFERENCE]" not in msgs[0]["content"]
    assert parse_score("reasoning \\boxed{0.75}") == 0.75
    assert parse_score("\\boxed{1} then \\boxed{0.25}") == 0.25
    assert parse_score("\\boxed{2.5}") is None and parse_score("no box") is None
    failed = LlmScorer("http://127.0.0.1:9").score("student", make_problem(0, 0), "x")
    assert failed.value != failed.value  # NaN: no score, never a made-up one


def _react(user, task, answer, attempts=1, re_asked=False, seed=0):
    return user.react(
        task, answer, last_request="REQ", attempts=attempts, re_asked=re_asked, next_request="NEXT",
        rng=random.Random(seed),
    )  # fmt: skip


@pytest.mark.parametrize("setting", ["student", "teacher", "manager"])
def test_users_are_deterministic_per_seed(setting):
    a, b, c = (SimulatedUser(setting, "u", s) for s in (1, 1, 2))
    assert [a.task(i) for i in range(5)] == [b.task(i) for i in range(5)]
    assert [a.task(i) for i in range(5)] != [c.task(i) for i in range(5)]
    task = a.task(0)
    bad_style = {"student": "ai_full", "teacher": "terse", "manager": "casual"}[setting]
    bad = styles.write_answer(styles.TASK_KIND[setting], task, bad_style, random.Random(0))
    for seed in range(10):
        assert _react(a, task, bad, seed=seed) == _react(b, task, bad, seed=seed)


@pytest.mark.parametrize("setting, good, mid, bad", [
    ("student", "casual", "two_part", "ai_full"),
    ("teacher", "specific_friendly", "brief_specific", "terse"),
    ("manager", "ai_full", "two_part", "casual"),  # the student's opposite
])  # fmt: skip
def test_users_react_as_specified_and_the_judge_reads_them(setting, good, mid, bad):
    user = SimulatedUser(setting, "u", 7)
    kinds = set()
    write = lambda task, style, rng: styles.write_answer(styles.TASK_KIND[setting], task, style, rng)  # noqa: E731
    for i in range(40):
        task = user.task(i)
        rng = random.Random(i)
        r = _react(user, task, write(task, good, rng), seed=i)
        assert r.kind == "satisfied" and r.message.endswith("NEXT") and r.next_task
        assert judge(r.message)[0] == 1
        r = _react(user, task, write(task, mid, rng), seed=i)
        assert r.kind == "moving_on" and judge(r.message) == (0, None)
        r = _react(user, task, write(task, bad, rng), seed=i)
        kinds.add(r.kind)
        score, hint = judge(r.message, previous="REQ")
        assert score == -1, r.message
        if r.kind == "re_ask":
            assert r.message == "REQ" and hint is None  # asked again: no directive, no hint
        else:
            assert r.kind == "correction" and not r.next_task
            wanted = [d for d in user.directives() if any(ph.lower() in r.message.lower() for ph in d.phrasings)]
            assert wanted, r.message
            assert hint and any(ph.lower() in hint.lower() for d in wanted for ph in d.phrasings), (r.message, hint)
        r = _react(user, task, write(task, bad, rng), attempts=MAX_ATTEMPTS, seed=i)
        assert r.kind == "give_up" and r.next_task and judge(r.message)[0] == 0
    assert kinds == {"re_ask", "correction"}


@pytest.mark.parametrize("setting", ["student", "teacher", "manager"])
def test_requests_carry_no_feedback_words(setting):
    """A new task in a reply must not read as praise or complaint: only the user's own words may."""
    user = SimulatedUser(setting, "u", 0)
    for i in range(150):
        request = user.ask(user.task(i), random.Random(i))
        assert judge(request) == (0, None), request
