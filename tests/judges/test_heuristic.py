import asyncio

import pytest

from judges.base import JudgeContext
from judges.heuristic import HeuristicJudge
from rlmath.signals import parse_boxed, parse_hint_vote


def ctx(next_state: str, role: str = "user", previous: str = "") -> JudgeContext:
    return JudgeContext(
        response="Here is the answer.", next_state_role=role, next_state=next_state, previous_user=previous
    )


@pytest.mark.parametrize(
    "reply, role, previous, score",
    [
        ("thanks, that's perfect", "user", "", 1),
        ("That's wrong. Use the metric system instead.", "user", "", -1),
        ("don't use bullet points", "user", "", -1),
        ("what is the capital of France?", "user", "What is the capital of France", -1),  # asked again
        ("and what about Spain?", "user", "", 0),
        ("thanks but that's wrong", "user", "", 0),  # mixed
        ("total 12\ndrwxr-xr-x 2 root root", "tool", "", 1),
        ("Traceback (most recent call last):\nKeyError: 'x'", "tool", "", -1),
        ("process exited with code 2", "tool", "", -1),
        ("exit code 0", "tool", "", 1),
    ],
)
def test_scores(reply, role, previous, score):
    raw = asyncio.run(HeuristicJudge().prm(ctx(reply, role, previous)))
    assert parse_boxed(raw) == score


def test_hint_is_the_corrective_sentence():
    raw = asyncio.run(HeuristicJudge().hint(ctx("Hmm. You should cite the source next time. Also, the sky is blue.")))
    vote = parse_hint_vote(raw)
    assert vote.score == 1 and vote.hint == "You should cite the source next time."
    assert parse_hint_vote(asyncio.run(HeuristicJudge().hint(ctx("thanks!")))).score == -1
    tool = parse_hint_vote(
        asyncio.run(HeuristicJudge().hint(ctx("Traceback (most recent call last):\nValueError: boom", role="tool")))
    )
    assert tool.score == 1 and "ValueError: boom" in tool.hint


def _step(tool_calls: str, results: str = "", text: str = "", parse_error: str | None = None, errors: int = 0):
    from judges.base import StepView

    return StepView(
        turn_idx=0,
        assistant_text=text,
        tool_calls=tool_calls,
        tool_results=results,
        parse_error=parse_error,
        errors=errors,
    )


def test_step_rules_score_broken_failed_repeated_and_good_steps():
    from judges.base import StepJudgeContext

    judge = HeuristicJudge()

    def score(current, history=()):
        ctx = StepJudgeContext(setting="terminal", task_instruction="t", history=list(history), current=current)
        return judge.step_score(ctx)[0]

    ok = _step('[{"name": "bash", "arguments": {"command": "ls"}}]', "[bash exit=0] a.txt")
    assert score(ok) == 1
    assert score(_step("parse error: bad json", parse_error="bad json")) == -1
    assert score(_step('[{"name": "bash"}]', "[bash exit=2] No such file or directory", errors=1)) == -1
    assert score(ok, history=[ok]) == -1  # going in circles
    assert score(_step("[]", text="The answer is \\boxed{4}.")) == 1
    assert score(_step("[]", text="  ")) == -1
    # a final answer after a tool call is judged against what the tool computed
    ran = _step('[{"name": "python", "arguments": {"code": "print(7**5)"}}]', "[python exit=0] 16807")
    assert score(_step("[]", text="The code printed 16807.\n\n\\boxed{16807}"), history=[ran]) == 1
    assert score(_step("[]", text="So \\boxed{1680}."), history=[ran]) == -1
    assert score(_step("[]", text="\\boxed{16807.5}"), history=[ran]) == -1
    assert score(_step("[]", text="Done, it printed the value."), history=[ran]) == 1  # no boxed answer to check
    assert (
        parse_boxed(
            asyncio.run(judge.step(StepJudgeContext(setting="toolcall", task_instruction="t", history=[], current=ok)))
        )
        == 1
    )
